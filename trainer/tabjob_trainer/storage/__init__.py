"""Where tables and runs live: local paths, volumes and object storage (s3://, gs://) behind one seam."""
