# Cross-builds deltafin for 64-bit ARM Linux on a Debian 12 x86-64 host:
# g++-aarch64-linux-gnu, and the arm64 multiarch -dev packages for the
# libraries (scripts/install-deps.sh arm64 installs both).
#   cmake -S . -B build/arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's multiarch layout: arm64 libraries and their CMake package files
# live under /usr/lib/aarch64-linux-gnu, headers in /usr/include (shared with
# the host, arch-specific ones under /usr/include/aarch64-linux-gnu).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Host programs (pkg-config, the emulator) come from the host; libraries and
# packages only from the arm64 directories, never the x86-64 ones.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config must read the arm64 .pc files only (PCRE2, ICU, liburing).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Built test binaries run under qemu-user: gtest_discover_tests lists them
# through it, and ctest runs them through it. No -L /usr/aarch64-linux-gnu:
# the arm64 -dev packages pull in libc6:arm64, whose loader and libc sit at
# the standard multiarch paths; with -L, the cross toolchain's own loader
# (libc6-arm64-cross, another Debian revision) would load that libc.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
