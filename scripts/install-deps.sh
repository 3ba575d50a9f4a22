#!/usr/bin/env bash
# Installs the system packages this crate needs to build and test, when they are missing:
#   libhdf5-dev + pkg-config  (the HDF5 writer links the system libhdf5)
#   python3 + python3-venv    (the compatibility tests run the real Python reader)
#   libclang1-14 + libclang-common-14-dev  (the `nvtx` and `mpi` features: nvtx-sys and mpi-sys
#                             run bindgen at build time, which loads libclang and needs clang's
#                             builtin headers)
#   libopenmpi-dev + openmpi-bin  (the `mpi` feature links OpenMPI; its tests run `mpirun`)
#   libhdf5-openmpi-dev        (the `mpio` feature links parallel HDF5, found through HDF5_DIR:
#                             see scripts/hdf5-mpio-dir.sh). Installing it makes Debian's
#                             `hdf5.pc` alternative point at the parallel library (it has the
#                             higher priority), which plain builds would then link; this script
#                             pins the alternative to the serial library when nobody chose.
#   prometheus                (the `prometheus` feature's test scrapes with a real Prometheus
#                             and checks the text with `promtool`; installed without its
#                             recommends and without starting the package's service)
#   chromium                  (the `scopeprof report` test opens the HTML page in headless Chromium)
# Debian/Ubuntu only (apt-get); runs apt-get through sudo when not root. Idempotent and quiet
# when everything is present.
set -euo pipefail

need=()
pkg-config --exists hdf5 2>/dev/null || need+=(libhdf5-dev pkg-config)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
command -v cc >/dev/null 2>&1 || need+=(gcc)
compgen -G '/usr/lib/*/liblikwid.so' >/dev/null || need+=(likwid) # likwid feature's tests
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || need+=(libclang1-14)
compgen -G '/usr/lib/llvm-*/lib/clang/*/include/stddef.h' >/dev/null || need+=(libclang-common-14-dev)
pkg-config --exists ompi 2>/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
pkg-config --exists hdf5-openmpi 2>/dev/null || need+=(libhdf5-openmpi-dev)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Installed apart: --no-install-recommends (no node exporter), no service started.
quiet_need=()
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || quiet_need+=(prometheus)

# Plain builds link serial HDF5: pin Debian's `hdf5.pc` alternative to it unless someone set it
# by hand (manual mode). Quiet when it already is.
pin_serial_hdf5() {
    local serial=/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-serial.pc
    command -v update-alternatives >/dev/null 2>&1 || return 0
    [ -e "$serial" ] || serial="$(ls /usr/lib/*/pkgconfig/hdf5-serial.pc 2>/dev/null | head -n1)"
    [ -n "$serial" ] && [ -e "$serial" ] || return 0
    local state
    state="$(update-alternatives --query hdf5.pc 2>/dev/null)" || return 0
    if grep -q '^Status: auto' <<<"$state" && ! grep -qx "Value: $serial" <<<"$state"; then
        if [ "$(id -u)" -ne 0 ] && [ -z "$sudo" ]; then
            echo "install-deps: note: hdf5.pc points at a parallel HDF5; plain builds link it" \
                "(as root: update-alternatives --set hdf5.pc $serial)" >&2
            return 0
        fi
        echo "install-deps: pinning the hdf5.pc alternative to the serial library" >&2
        $sudo update-alternatives --set hdf5.pc "$serial" >/dev/null
    fi
}

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
fi

if [ ${#need[@]} -eq 0 ] && [ ${#quiet_need[@]} -eq 0 ]; then
    pin_serial_hdf5
    exit 0
fi

if [ "$(id -u)" -ne 0 ] && [ -z "$sudo" ]; then
    echo "install-deps: need root (or sudo) to install: ${need[*]} ${quiet_need[*]}" >&2
    exit 1
fi
command -v apt-get >/dev/null 2>&1 || {
    echo "install-deps: apt-get not found; install these by hand: ${need[*]} ${quiet_need[*]}" >&2
    exit 1
}
echo "install-deps: installing ${need[*]} ${quiet_need[*]}" >&2
$sudo apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#quiet_need[@]} -gt 0 ]; then
    # The prometheus package would start its own server on port 9090; the tests start theirs
    # on a free loopback port. policy-rc.d (exit 101) tells invoke-rc.d and
    # deb-systemd-invoke not to start services; added only for this install when absent.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        trap '$sudo rm -f "$policy"' EXIT
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "${quiet_need[@]}" >/dev/null
fi
pin_serial_hdf5
