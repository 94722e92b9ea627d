# Sourced by run-main.sh and run-tests.sh: installs missing packages (unless
# SKIP_BOOTSTRAP=1), configures BUILD_DIR once and builds it.
# usage: build_tree CALLER [default meson setup args...]
# Env: BUILD_DIR (default build), MESON_ARGS (extra setup args for a new build dir),
# JOBS (build jobs, default: number of cores). A caller that needs only some programs sets
# the array BUILD_TARGETS (meson compile's [PATH/]NAME targets) before calling; unset or
# empty builds everything (every test binary included).
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

build_tree() {
  local caller="$1"
  shift
  [[ "${SKIP_BOOTSTRAP:-0}" == 1 ]] || bash scripts/bootstrap.sh
  if [[ -f "$BUILD_DIR/meson-private/coredata.dat" ]]; then
    echo "$caller: reusing configured build dir $BUILD_DIR"
  else
    # shellcheck disable=SC2086  # MESON_ARGS is a list of words on purpose
    meson setup "$BUILD_DIR" --wrap-mode=nodownload "$@" ${MESON_ARGS:-}
  fi
  local targets=()
  [[ -z "${BUILD_TARGETS+set}" ]] || targets=("${BUILD_TARGETS[@]}")
  meson compile -C "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
}
