from tabjob.cli import main

raise SystemExit(main())
