#!/usr/bin/env bash
# FA4-cute (flash-attn-4's CuTe-DSL kernels; on Hopper its sm90 kernel) as a benchmark peer on the GPU
# machine, which reaches no package registry. Its wheels are fetched here and travel in the carry of two
# device calls made back to back (the 92 MB libs wheel is larger than one call's 64 MiB, so it goes in two
# parts), then are joined and installed there, outside the repository (never a dependency of fa4rt).
#
#   tools/fa4cute_peer.sh fetch     here: the wheels into .whl/p1 (the libs wheel's first part) and .whl/p2
#                                   (its second part and the other wheels); ../shared/docs/baselines.md says which
#   tools/fa4cute_peer.sh stage     device call 1, carrying .whl/p1: the first part to /tmp/fa4cute-wheels
#   tools/fa4cute_peer.sh install   device call 2 on the still-warm machine, carrying .whl/p2: the parts joined,
#                                   every wheel installed into /tmp/fa4cute, and one import tried
#   tools/fa4cute_peer.sh path      the PYTHONPATH entries of that install (tools/gpu_session.sh adds them
#                                   itself when /tmp/fa4cute exists)
set -eu
cd "$(dirname "$0")/.."
TARGET=/tmp/fa4cute
STAGED=/tmp/fa4cute-wheels
LIBS=nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
PART_BYTES=58000000  # with the working tree, under a call's 64 MiB

case "${1:-}" in
  fetch)
    rm -rf .whl/p1 .whl/p2 .whl/all && mkdir -p .whl/p1 .whl/p2 .whl/all
    # cp312 manylinux wheels, the GPU machine's Python; --no-deps: torch and the CUDA libraries are there.
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --dest .whl/all \
      flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
      nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi torch-c-dlpack-ext \
      quack-kernels
    head -c $PART_BYTES ".whl/all/$LIBS" > .whl/p1/libs.part1
    tail -c +$((PART_BYTES + 1)) ".whl/all/$LIBS" > .whl/p2/libs.part2
    find .whl/all -name '*.whl' ! -name "$LIBS" -exec mv {} .whl/p2/ \;
    rm -rf .whl/all
    du -sh .whl/p1 .whl/p2
    ;;
  stage)
    mkdir -p "$STAGED" && cp .whl/p1/libs.part1 "$STAGED/"
    echo "staged $(du -sh "$STAGED" | cut -f1) in $STAGED"
    ;;
  install)
    [ -f "$STAGED/libs.part1" ] || { echo "no $STAGED/libs.part1: run 'stage' in the call before, on this machine"; exit 1; }
    cat "$STAGED/libs.part1" .whl/p2/libs.part2 > "$STAGED/$LIBS"
    cp .whl/p2/*.whl "$STAGED/"
    python3 -m pip install --quiet --no-deps --target "$TARGET" "$STAGED"/*.whl
    PYTHONPATH=$("$0" path) python3 -c "from flash_attn.cute import flash_attn_func" && echo "FA4-cute imports from $TARGET"
    ;;
  path)
    # A --target install does not run the package's .pth file, which would add dsl_packages.
    echo "$TARGET:$TARGET/nvidia_cutlass_dsl/dsl_packages"
    ;;
  *)
    sed -n '2,/^set -eu/p' "$0" | sed '$d'
    exit 2
    ;;
esac
