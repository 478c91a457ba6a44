"""Model families: GBM (LightGBM) and NN_TORCH (PyTorch MLP), behind one small interface (base.py)."""
