# Sourced by gpu_check.sh --pack and gpu_train_check.sh on a GPU machine without phax's packages:
# the shared libraries packed by gpu_pack.sh (unpacked in .gpu/unpacked/lib), then CUDA's from
# the toolkit, else from the nvidia-* Python packages.
GPU_UNPACKED=.gpu/unpacked
gpu_nvidia_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$GPU_UNPACKED/lib:/usr/local/cuda/lib64:${gpu_nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
