#!/usr/bin/env bash
# Pack what a GPU machine without a package index needs to run the GPU suite
# (benchmarks/gpu_check.py), into one folder small enough to carry there:
#
#   bash tools/gpu_bundle.sh [OUT]          # default OUT: .gpu_bundle (git-ignored)
#
# Made here, where PyPI and Debian's archive are reachable:
#   OUT/rocq.tar.xz     Rocq 8.16 from Debian's packages (apt-get download coq
#                       libcoq-core-ocaml libcoq-stdlib), unpacked with dpkg -x
#                       and cut to what the verifier runs: coqtop, coqc, coqchk,
#                       the standard library's .vo files and the plugins (.cmxs).
#                       The .deb files themselves are 137 MB, over what one
#                       transfer to the lent machines may carry (64 MiB).
#   OUT/python.tar.xz   the Python packages SGS needs that the machine's image
#                       lacks (DEVICE_HAS below: its image as of 2026-11-17),
#                       installed for its Python ($SGS_BUNDLE_PYTHON, 3.12) with
#                       pip --target, at the versions of this machine's .venv;
#                       Ray's Java jar, the dashboard's source maps and its
#                       binaries' symbol tables left out.
#   OUT/activate.sh     to source there: unpacks both once under /tmp/sgs-bundle
#                       and sets PATH, COQLIB, COQCORELIB, OCAMLPATH, PYTHONPATH.
#
# There:  source .gpu_bundle/activate.sh && make gpu-check
#
# vLLM's CUDA build is not in the bundle: its wheel is several hundred MB and
# is built against torch 2.13, while the lent machines' image has torch 2.11;
# on a machine without it the suite skips the vLLM stages and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
export XZ_OPT="${XZ_OPT:--9 -T0}"

OUT="${1:-.gpu_bundle}"
PY="${SGS_BUNDLE_VENV_PYTHON:-.venv/bin/python}"
TARGET_PYTHON="${SGS_BUNDLE_PYTHON:-3.12}"
[[ -x "$PY" ]] || { echo "gpu_bundle: run tools/setup.sh first (needs $PY)" >&2; exit 2; }
command -v apt-get >/dev/null && command -v dpkg >/dev/null \
  || { echo "gpu_bundle: needs apt-get and dpkg (a Debian or Ubuntu machine)" >&2; exit 2; }
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$OUT"

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
tar -C "$ROCQ" -cJf "$OUT/rocq.tar.xz" .

# --- Python packages --------------------------------------------------------------
# Names of the packages the lent machines' image already has (device README, KINDS.md).
DEVICE_HAS="absl-py accelerate aiohttp aiosignal attrs certifi charset-normalizer click cloudpickle filelock
frozenlist fsspec grpcio h11 httpx huggingface-hub idna jinja2 markupsafe matplotlib msgpack multidict networkx
numpy nvidia-ml-py packaging pandas pillow pip protobuf psutil py-cpuinfo pyarrow pyyaml regex requests rich
safetensors scipy setuptools six sympy tokenizers torch tqdm transformers triton typing-extensions urllib3 yarl
einops ninja"
echo "[bundle] Python $TARGET_PYTHON packages: the closure of ray[train], deepspeed, hydra-core beyond the image"
PACKAGES="$("$PY" - "$TARGET_PYTHON" $DEVICE_HAS <<'EOF'
import re, sys
from importlib import metadata
from packaging.requirements import Requirement
target, have = sys.argv[1], {re.sub(r"[-_.]+", "-", n).lower() for n in sys.argv[2:]}
env = {"python_version": target, "python_full_version": target + ".0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython"}
todo, seen = [("ray", {"train"}), ("deepspeed", set()), ("hydra-core", set()), ("omegaconf", set())], {}
while todo:
    name, extras = todo.pop()
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in have or (key in seen and extras <= seen[key]):
        continue
    seen[key] = seen.get(key, set()) | extras
    for line in metadata.requires(name) or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in (seen[key] | {""})):
            todo.append((req.name, set(req.extras)))
print(" ".join(f"{name}=={metadata.version(name)}" for name in sorted(seen)))
EOF
)"
echo "[bundle] $PACKAGES"
mkdir -p "$STAGE/wheels" "$STAGE/site"
for spec in $PACKAGES; do
  # a wheel for the target Python where PyPI has one; otherwise (DeepSpeed: sdist only) build it here
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$TARGET_PYTHON" --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$STAGE/wheels" "$spec" 2>/dev/null \
    || "$PY" -m pip wheel -q --no-deps -w "$STAGE/wheels" "$spec"
done
"$PY" -m pip install -q --no-deps --no-compile --target "$STAGE/site" --python-version "$TARGET_PYTHON" \
    --implementation cp --only-binary=:all: --platform manylinux2014_x86_64 "$STAGE"/wheels/*.whl
rm -rf "$STAGE/site/ray/jars" "$STAGE"/site/bin
find "$STAGE/site" \( -name '*.js.map' -o -name __pycache__ \) -prune -exec rm -rf {} +
# Ray's binaries carry symbol tables the processes never read (a third of their size)
if command -v strip >/dev/null; then
  find "$STAGE/site/ray" -type f \( -name '*.so' -o -perm -u+x \) -exec sh -c \
    'for f; do head -c4 "$f" | grep -q ELF && strip --strip-unneeded "$f"; done' sh {} +
fi
tar -C "$STAGE/site" -cJf "$OUT/python.tar.xz" .

cat > "$OUT/activate.sh" <<'EOF'
# source this on the GPU machine: Rocq and the Python packages of the bundle beside this file
BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
UNPACKED=/tmp/sgs-bundle
for part in rocq python; do
  if [[ ! -d "$UNPACKED/$part" ]]; then
    mkdir -p "$UNPACKED/$part.partial" && tar -C "$UNPACKED/$part.partial" -xJf "$BUNDLE/$part.tar.xz" \
      && mv "$UNPACKED/$part.partial" "$UNPACKED/$part"
  fi
done
export PATH="$UNPACKED/rocq/bin:$PATH" COQLIB="$UNPACKED/rocq/lib/coq" COQCORELIB="$UNPACKED/rocq/lib/coq-core"
export OCAMLPATH="$UNPACKED/rocq/lib" PYTHONPATH="$UNPACKED/python${PYTHONPATH:+:$PYTHONPATH}"
EOF
du -sh "$OUT"/*
TOTAL_MIB=$(( $(du -sk "$OUT" | cut -f1) / 1024 ))
echo "[bundle] $OUT: $TOTAL_MIB MiB (one transfer to a lent machine carries at most 64 MiB with the repository)"
