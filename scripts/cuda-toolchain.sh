# Sourced by scripts/cuda-check and scripts/gpu-bundle: NVIDIA's compiler and libraries
# from their Python wheels, pinned to CUDA 13.0.x (the target driver is CUDA 13.0, on
# which PTX from a newer nvcc does not load), installed once into a venv in a cache folder
# outside the repository, and a CUDA root in the layout candle-kernels and cudarc expect.
#
# Environment:
#   CUDA_CHECK_CACHE  venv and CUDA root (default ${XDG_CACHE_HOME:-$HOME/.cache}/creg-runner/cuda-13.0)
#
# cuda_toolchain [--install-only]: installs the wheels (one installer at a time), then,
# unless --install-only, builds the CUDA root and exports PATH, CUDA_ROOT, CUDA_PATH,
# CUDA_HOME, NVCC, CUDARC_CUDA_VERSION and CUDA_TOOLCHAIN_LIB (the wheels' libraries).
# It calls `die` (the sourcing script's) on failure.

# The pinned wheels (CUDA 13.0.x). Change them together; the cache re-installs on change.
CUDA_PINS=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85
    nvidia-cublas==13.0.2.14
    nvidia-curand==10.4.0.35
    nvidia-cuda-nvrtc==13.0.88
)

cuda_toolchain() {
    local cache=${CUDA_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/creg-runner/cuda-13.0}
    local venv=$cache/venv root=$cache/root
    local stamp=$venv/.cuda-check-pins
    command -v python3 >/dev/null 2>&1 ||
        die "python3 not found: install Python 3 (Debian: apt-get install python3 python3-venv)"

    # One installer at a time: a second caller waits here, then finds the pins installed.
    mkdir -p "$cache"
    exec 9>"$cache/install.lock"
    flock 9
    if [[ ! -x $venv/bin/python ]]; then
        python3 -c 'import venv, ensurepip' >/dev/null 2>&1 ||
            die "python3 has no venv/ensurepip module: install it (Debian: apt-get install python3-venv)"
        echo "cuda-toolchain: creating the venv in $venv" >&2
        python3 -m venv "$venv" || die "python3 -m venv $venv failed (Debian: apt-get install python3-venv)"
    fi
    "$venv/bin/python" -m pip --version >/dev/null 2>&1 ||
        die "pip is missing from the venv $venv: install python3-pip / python3-venv, then delete $venv and rerun"
    local want
    want=$(printf '%s\n' "${CUDA_PINS[@]}")
    if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
        echo "cuda-toolchain: installing the CUDA 13.0 wheels into $venv" >&2
        "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --no-compile "${CUDA_PINS[@]}"
        printf '%s\n' "$want" >"$stamp"
    else
        echo "cuda-toolchain: CUDA 13.0 wheels already installed in $venv" >&2
    fi
    flock -u 9
    exec 9>&-
    [[ ${1:-} == --install-only ]] && return 0

    local site cu d l
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    cu=$site/nvidia/cu13
    [[ -x $cu/bin/nvcc ]] || die "no nvcc at $cu/bin/nvcc: delete $venv and rerun"
    mkdir -p "$root/lib64/stubs"
    for d in bin include nvvm; do
        ln -sfn "$cu/$d" "$root/$d"
    done
    for l in cudart cublas cublasLt nvrtc; do
        ln -sfn "$cu/lib/lib$l.so.13" "$root/lib64/lib$l.so"
    done
    ln -sfn "$cu/lib/libcurand.so.10" "$root/lib64/libcurand.so"

    export PATH=$root/bin:$PATH
    export CUDA_ROOT=$root CUDA_PATH=$root CUDA_HOME=$root NVCC=$root/bin/nvcc
    export CUDARC_CUDA_VERSION=13000
    export CUDA_TOOLCHAIN_LIB=$cu/lib
}
