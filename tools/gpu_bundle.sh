#!/usr/bin/env bash
# Pack what a GPU machine without a package index needs to run the GPU suite
# (benchmarks/gpu_check.py), in pieces that one call to such a machine can
# carry each (the lent machines take 64 MiB per call, repository included):
#
#   bash tools/gpu_bundle.sh [--vllm VERSION] [--call-mib N] [OUT]   # OUT: .gpu_bundle (git-ignored)
#
# Made here, where PyPI and Debian's archive are reachable:
#   rocq.tar.xz     Rocq 8.16 from Debian's packages (apt-get download coq
#                   libcoq-core-ocaml libcoq-stdlib), unpacked with dpkg -x and
#                   cut to what the verifier runs: coqtop, coqc, coqchk, the
#                   standard library's .vo files and the plugins (.cmxs).
#   python.tar.xz   the Python packages SGS needs that the machine's image lacks
#                   (DEVICE_HAS below: its image as of 2026-11-17): ray[default,train],
#                   DeepSpeed, Hydra, wandb and their requirements, as wheels for
#                   CPython 3.12 (tools/gpu_bundle.py wheels), at this .venv's
#                   versions where it has them; Ray's jar, source maps and symbol
#                   tables left out.
#   vllm.tar.xz     with --vllm VERSION: vLLM's CUDA build at VERSION and the
#                   requirements the image lacks.  VERSION must be built for the
#                   image's torch: 0.25.1 is the last release for torch 2.11.
#                   Cut to what a dense model on Hopper runs (FlashAttention 3,
#                   the custom ops, the sleep-mode allocator); left out: FA2, the
#                   MoE, DeepGEMM, FlashMLA and Blackwell kernels, the Rust front
#                   end, FlashInfer and the other CUDA kernel packages it lists.
# The archives are split and placed into OUT/call1, OUT/call2, ... (at most
# --call-mib each; by default what a 64 MiB call leaves beside the repository's tracked
# files, less 2 MiB), each with stash.sh and activate.sh.
#
# There, one call per folder, in any order, the suite in the last:
#   bash .gpu_bundle/call1/stash.sh                    # carry .gpu_bundle/call1
#   source .gpu_bundle/call2/activate.sh && make gpu-check
# stash.sh keeps its folder's pieces in /tmp/sgs-bundle/carried (the machine
# stays warm for 30 s between calls); activate.sh stashes too, joins the parts,
# unpacks once under /tmp/sgs-bundle and sets PATH, COQLIB, COQCORELIB,
# OCAMLPATH, OCAMLFIND_CONF (findlib's configuration, naming the bundle's plugins) and
# PYTHONPATH, or names the pieces still missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export XZ_OPT="${XZ_OPT:--9 -T0}"

usage() { sed -n '2,/^set -euo/{/^set -euo/!p;}' "$0" | sed 's/^# \{0,1\}//'; }
VLLM_VERSION="" CALL_MIB="" OUT=".gpu_bundle"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --vllm) [[ $# -ge 2 && -n "$2" ]] || { echo "gpu_bundle: --vllm needs a version, e.g. 0.25.1" >&2; exit 2; }
            VLLM_VERSION="$2"; shift 2 ;;
    --call-mib) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -ge 8 && "$2" -le 63 ]] \
                  || { echo "gpu_bundle: --call-mib needs a whole number of MiB from 8 to 63" >&2; exit 2; }
                CALL_MIB="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu_bundle: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) OUT="$1"; shift ;;
  esac
done
PY="${SGS_BUNDLE_VENV_PYTHON:-.venv/bin/python}"
[[ -x "$PY" ]] || { echo "gpu_bundle: run tools/setup.sh first (needs $PY)" >&2; exit 2; }
command -v apt-get >/dev/null && command -v dpkg >/dev/null \
  || { echo "gpu_bundle: needs apt-get and dpkg (a Debian or Ubuntu machine)" >&2; exit 2; }
if [[ -z "$CALL_MIB" ]]; then  # a call carries the working tree too: the pieces get what it leaves
  TRACKED_MIB=$(git ls-files -z | du --files0-from=- -cb 2>/dev/null | tail -1 | awk '{print int($1 / 1048576) + 1}')
  CALL_MIB=$(( 62 - TRACKED_MIB ))
  (( CALL_MIB >= 8 )) || { echo "gpu_bundle: the repository's files take ${TRACKED_MIB} MiB of a 64 MiB call" >&2; exit 2; }
fi
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/archives"

# --- Rocq ---------------------------------------------------------------------
echo "[bundle] Rocq: apt-get download"
(cd "$STAGE" && mkdir debs && cd debs && apt-get download -q coq libcoq-core-ocaml libcoq-stdlib >/dev/null)
for deb in "$STAGE"/debs/*.deb; do dpkg -x "$deb" "$STAGE/root"; done
ROCQ="$STAGE/rocq"
mkdir -p "$ROCQ/bin" "$ROCQ/lib"
cp "$STAGE"/root/usr/bin/{coqtop,coqc,coqchk} "$ROCQ/bin/"
cp -r "$STAGE/root/usr/lib/ocaml/coq" "$ROCQ/lib/"
find "$ROCQ/lib/coq" -name '*.v' -delete   # sources: the compiled .vo files are what Require loads
(cd "$STAGE/root/usr/lib/ocaml" && find coq-core \( -name META -o -name '*.cmxs' \) -exec cp --parents {} "$ROCQ/lib/" \;)
tar -C "$ROCQ" -cJf "$STAGE/archives/rocq.tar.xz" .

# --- Python packages --------------------------------------------------------------
# What the lent machines' image already has (device README, KINDS.md, 2026-11-17).
DEVICE_HAS="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi
charset-normalizer click cloudpickle cmake cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cython
einops filelock frozenlist fsspec grpcio h11 hf-xet httpcore httpx huggingface-hub idna jinja2 joblib markdown
markdown-it-py markupsafe matplotlib mdurl ml-dtypes msgpack multidict networkx ninja numba numpy nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx opencv-python-headless packaging pandas pillow pip prometheus-client propcache
protobuf psutil py-cpuinfo pyarrow pygments pyyaml regex requests rich safetensors scipy sentencepiece setuptools
shellingham six sympy tiktoken tokenizers torch torchaudio torchvision tqdm transformers triton typer
typing-extensions urllib3 uvloop werkzeug wheel wrapt xxhash yarl zipp"
# vLLM requirements not carried: CUDA kernel packages the dense path on Hopper does without (the
# FlashInfer sampler is switched off in activate.sh), video decoding, and the image's own torch stack.
VLLM_NOT_CARRIED="flashinfer-python flashinfer-cubin tilelang nvidia-cutlass-dsl quack-kernels humming-kernels
tokenspeed-mla pynvvideocodec torchcodec nvidia-cudnn-frontend fastsafetensors nvtx"

# install wheels for the target Python into $2, stripped of what processes never read
install_wheels() {
  "$PY" -m pip install -q --no-deps --no-compile --target "$2" --python-version 3.12 --implementation cp \
      --only-binary=:all: $("$PY" -c 'import sys; sys.path.insert(0, "tools"); import gpu_bundle
print(" ".join("--platform " + name for name in gpu_bundle.PLATFORMS))') "$1"/*.whl
  rm -rf "$2/bin" "$2/ray/jars"
  find "$2" \( -name '*.js.map' -o -name __pycache__ \) -prune -exec rm -rf {} +
  if command -v strip >/dev/null && [[ -d "$2/ray" ]]; then   # Ray's binaries: a third of their size is symbols
    find "$2/ray" -type f \( -name '*.so' -o -perm -u+x \) -exec sh -c \
      'for f; do head -c4 "$f" | grep -q ELF && strip --strip-unneeded "$f"; done' sh {} +
  fi
}
version_of() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

# Ray's default extra is its dashboard and State API: without them (2026-11-26, H100) Ray started no
# dashboard and Ray Train's PlacementGroupCleaner logged "Failed to query ... actor state" over and over.
echo "[bundle] Python 3.12 packages: ray[default,train], deepspeed, hydra-core, wandb and what they need beyond the image"
"$PY" tools/gpu_bundle.py wheels --out "$STAGE/wheels" --have "$DEVICE_HAS" \
    "ray[default,train]==$(version_of ray)" "deepspeed==$(version_of deepspeed)" "hydra-core==$(version_of hydra-core)" \
    "omegaconf==$(version_of omegaconf)" "wandb==$(version_of wandb)"
install_wheels "$STAGE/wheels" "$STAGE/site"
tar -C "$STAGE/site" -cJf "$STAGE/archives/python.tar.xz" .

# --- vLLM (optional) -----------------------------------------------------------------
if [[ -n "$VLLM_VERSION" ]]; then
  echo "[bundle] vLLM $VLLM_VERSION (CUDA build) and its requirements beyond the image and python.tar.xz"
  CARRIED="$(ls "$STAGE/site" | sed -n 's/-[0-9][^-]*\.dist-info$//p')"
  # vLLM 0.25.1 pins apache-tvm-ffi 0.1.9, the xgrammar it allows wants >= 0.1.11; 0.1.15.post2 (this
  # .venv's) imported with vLLM 0.25.1 and xgrammar 0.2.8 on an H100 (2026-11-26)
  "$PY" tools/gpu_bundle.py wheels --out "$STAGE/vllm-wheels" --have "$DEVICE_HAS $CARRIED" \
      --skip "$VLLM_NOT_CARRIED" --override apache-tvm-ffi==0.1.15.post2 "vllm==$VLLM_VERSION"
  mv "$STAGE"/vllm-wheels/vllm-*.whl "$STAGE/"
  install_wheels "$STAGE/vllm-wheels" "$STAGE/vllm-site"
  (cd "$STAGE/vllm-site" && unzip -q "$STAGE"/vllm-*.whl)
  V="$STAGE/vllm-site/vllm"
  rm -rf "$V/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$V/_moe_C_stable_libtorch.abi3.so" "$V/_flashmla_C.abi3.so" \
         "$V/vllm-rs" "$V/third_party/deep_gemm" "$V/third_party/fmha_sm100"
  find "$STAGE/vllm-site" -name __pycache__ -prune -exec rm -rf {} +
  tar -C "$STAGE/vllm-site" -cJf "$STAGE/archives/vllm.tar.xz" .
fi

# --- call-sized folders ------------------------------------------------------------
rm -rf "$OUT" && mkdir -p "$OUT"
"$PY" tools/gpu_bundle.py pack --max-mib "$CALL_MIB" --out "$OUT" "$STAGE"/archives/*.tar.xz
du -sh "$OUT"/call*
echo "[bundle] $OUT: $(ls -d "$OUT"/call* | wc -l) call(s) of at most $CALL_MIB MiB"
