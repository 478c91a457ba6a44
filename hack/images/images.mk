# Container images built here with buildah (hack/images/build.sh). Included by the top Makefile.
.PHONY: images images-print lightgbm-cuda-wheel

# Cheap when warm: build.sh hashes its inputs and builds nothing when the archives for that hash exist.
images:
	hack/images/build.sh

images-print:
	hack/images/build.sh --print

# The e2e tests and the chaos runs run the images on the cluster's nodes, so they must exist before pytest starts.
pytest chaos: images

# Proves that the Dockerfile's CUDA LightGBM stage compiles without a GPU or an NVIDIA image (slow: tens of
# minutes on 2 cores). LIGHTGBM_CUDA_ARCHS= (empty) compiles LightGBM's full architecture list.
lightgbm-cuda-wheel:
	hack/images/lightgbm_cuda.sh
