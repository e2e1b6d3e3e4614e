# The one place that finds libtorch and the CUDA build environment.
#
# `mesa_anyjev_torch` (INTERFACE): what every translation unit that uses
# libtorch compiles and links against: torch's headers and the CPU
# libraries alone (libtorch_cpu, c10). Calls into CUDA (libtorch_cuda,
# c10_cuda, the CUDA runtime, our kernels) go through one seam,
# server/model/cuda/cuda_calls.h, whose two sides server/model/CMakeLists.txt
# builds: `mesa_anyjev_cuda` (needs MESA_ANYJEV_CUDA_BUILD) and its twin
# `mesa_anyjev_cuda_none`.
#
# One CUDA build environment on every host (docs/build.md, "Where each CUDA
# header and library comes from"): nvcc and the headers it compiles the
# kernels with are the pinned compiler wheels that scripts/install.sh lays
# out in MESA_ANYJEV_CUDA_ROOT (the same on a build host, in the image's
# build stage and on the GB10; never a toolkit that happens to be installed
# in /usr/local); the CUDA libraries' headers and the libraries themselves
# are those of torch's own nvidia wheels (site-packages/nvidia/*/include,
# /lib), the ones the daemon loads.
#
# Natively: the PyPI torch wheel's own CMake config (the Makefile passes
# torch.utils.cmake_prefix_path). Cross-compiling (cmake/aarch64-linux-gnu.cmake,
# `make check-arm64`): that config refuses ("uses CUDA but I cannot find the
# CUDA libraries"), so the targets are made from the aarch64 wheel unpacked
# by `scripts/install.sh --arm64` (MESA_ANYJEV_TORCH_ROOT): libtorch_cpu and
# c10; with MESA_ANYJEV_CROSS_CUDA (`make check-arm64 CUDA=1`) also
# libtorch_cuda and its nvidia wheels, and the kernels for sm_120.

set(MESA_ANYJEV_CUDA_ROOT "/opt/mesa-anyjev/cuda-13.0" CACHE PATH
  "nvcc and its headers: the compiler wheels of scripts/cuda-compiler-requirements.txt")
option(MESA_ANYJEV_CROSS_CUDA
  "Cross-compiling: link libtorch_cuda of the target's wheels and build the kernels" OFF)

# The wheel folders of the CUDA libraries (headers and shared libraries)
# under a site-packages folder `site`: torch 2.15's nvidia/cu13, or one
# folder per library in older layouts.
function(mesa_anyjev_nvidia_dirs site)
  file(GLOB include_dirs LIST_DIRECTORIES true "${site}/nvidia/*/include")
  file(GLOB lib_dirs LIST_DIRECTORIES true "${site}/nvidia/*/lib")
  set(MESA_ANYJEV_NVIDIA_INCLUDE_DIRS "${include_dirs}" PARENT_SCOPE)
  set(MESA_ANYJEV_NVIDIA_LIB_DIRS "${lib_dirs}" PARENT_SCOPE)
endfunction()

# Where the loader and the linker find the nvidia wheels' libraries, ahead
# of any system copy (one set of CUDA libraries in the process).
function(mesa_anyjev_rpaths target)
  foreach(dir ${ARGN})
    target_link_options(${target} INTERFACE "LINKER:-rpath-link,${dir}"
      "LINKER:-rpath,${dir}")
  endforeach()
endfunction()

if(NOT CMAKE_CROSSCOMPILING)
  find_path(MESA_ANYJEV_TORCH_CONFIG_DIR TorchConfig.cmake PATH_SUFFIXES Torch
    NO_DEFAULT_PATH PATHS ${CMAKE_PREFIX_PATH})
  if(NOT MESA_ANYJEV_TORCH_CONFIG_DIR)
    message(FATAL_ERROR "libtorch: no TorchConfig.cmake under CMAKE_PREFIX_PATH "
      "(${CMAKE_PREFIX_PATH}); configure through the Makefile (make configure)")
  endif()
  get_filename_component(site "${MESA_ANYJEV_TORCH_CONFIG_DIR}/../../../.." ABSOLUTE)
  # Cached for scripts/check_cuda_includes.py: where torch's wheels are.
  set(MESA_ANYJEV_SITE_PACKAGES "${site}" CACHE INTERNAL "torch's site-packages")
  mesa_anyjev_nvidia_dirs("${MESA_ANYJEV_SITE_PACKAGES}")
  if(MESA_ANYJEV_NVIDIA_LIB_DIRS)
    # A CUDA wheel: its config enables CMake's CUDA language (a probe
    # compiled with nvcc) and finds a CUDA toolkit. Both are the compiler
    # wheels'; cudart is linked from torch's own wheel.
    if(NOT EXISTS "${MESA_ANYJEV_CUDA_ROOT}/bin/nvcc")
      message(FATAL_ERROR "libtorch: torch is a CUDA build and "
        "${MESA_ANYJEV_CUDA_ROOT}/bin/nvcc is missing; run scripts/install.sh "
        "(or set MESA_ANYJEV_CUDA_ROOT to the compiler wheels' folder)")
    endif()
    set(CMAKE_CUDA_COMPILER "${MESA_ANYJEV_CUDA_ROOT}/bin/nvcc" CACHE FILEPATH "" FORCE)
    set(CUDA_TOOLKIT_ROOT_DIR "${MESA_ANYJEV_CUDA_ROOT}" CACHE PATH "" FORCE)
    set(CUDAToolkit_ROOT "${MESA_ANYJEV_CUDA_ROOT}")
    find_library(CUDA_cudart_LIBRARY NAMES libcudart.so.13 libcudart.so.12 cudart
      PATHS ${MESA_ANYJEV_NVIDIA_LIB_DIRS} NO_DEFAULT_PATH)
    find_library(CUDA_nvrtc_LIBRARY NAMES libnvrtc.so.13 libnvrtc.so.12 nvrtc
      PATHS ${MESA_ANYJEV_NVIDIA_LIB_DIRS} NO_DEFAULT_PATH)
  endif()
  # A CUDA wheel's config probes the GPU with try_run unless the architectures
  # are named; build hosts have no GPU. 9.0 = H100/H200, 12.0 = GB10 (sm_121
  # runs sm_120 code). CMake 3.25 knows no CUDA20 dialect for nvcc.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "9.0;12.0")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  find_package(Torch REQUIRED)
  message(STATUS "libtorch: ${Torch_DIR} (version ${Torch_VERSION})")
  add_library(mesa_anyjev_torch INTERFACE)
  target_link_libraries(mesa_anyjev_torch INTERFACE torch_cpu_library)
  target_include_directories(mesa_anyjev_torch SYSTEM INTERFACE
    "$<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>")
  mesa_anyjev_rpaths(mesa_anyjev_torch ${MESA_ANYJEV_NVIDIA_LIB_DIRS})
  if(TARGET torch_cuda_library AND CMAKE_CUDA_COMPILER_LOADED)
    set(MESA_ANYJEV_CUDA_BUILD ON)
    add_library(mesa_anyjev_torch_cuda INTERFACE)
    target_link_libraries(mesa_anyjev_torch_cuda INTERFACE torch)
    # Before any other folder: the headers of the libraries the process
    # loads (ATen/cuda includes cuBLAS's, cuSPARSE's and cuSOLVER's).
    target_include_directories(mesa_anyjev_torch_cuda SYSTEM BEFORE INTERFACE
      ${MESA_ANYJEV_NVIDIA_INCLUDE_DIRS})
  else()
    set(MESA_ANYJEV_CUDA_BUILD OFF)
  endif()
  return()
endif()

set(MESA_ANYJEV_TORCH_ROOT "/opt/mesa-anyjev/arm64" CACHE PATH
  "The unpacked torch wheel (torch/, nvidia/) of the target architecture")
set(mesa_anyjev_torch_lib "${MESA_ANYJEV_TORCH_ROOT}/torch/lib")
mesa_anyjev_nvidia_dirs("${MESA_ANYJEV_TORCH_ROOT}")
set(mesa_anyjev_needed "${mesa_anyjev_torch_lib}/libtorch_cpu.so"
  "${mesa_anyjev_torch_lib}/libc10.so")
if(MESA_ANYJEV_CROSS_CUDA)
  list(APPEND mesa_anyjev_needed "${mesa_anyjev_torch_lib}/libtorch_cuda.so"
    "${mesa_anyjev_torch_lib}/libc10_cuda.so")
endif()
foreach(needed ${mesa_anyjev_needed})
  if(NOT EXISTS "${needed}")
    message(FATAL_ERROR "libtorch for ${CMAKE_SYSTEM_PROCESSOR}: ${needed} is missing; "
      "run scripts/install.sh --arm64 (--arm64-cuda for CUDA=1; or set "
      "MESA_ANYJEV_TORCH_ROOT)")
  endif()
endforeach()
add_library(mesa_anyjev_torch INTERFACE)
# -isystem as the wheel's config does: its headers are not held to our warnings.
target_include_directories(mesa_anyjev_torch SYSTEM INTERFACE
  "${MESA_ANYJEV_TORCH_ROOT}/torch/include"
  "${MESA_ANYJEV_TORCH_ROOT}/torch/include/torch/csrc/api/include")
target_compile_features(mesa_anyjev_torch INTERFACE cxx_std_20)
# libtorch_cpu's own NEEDED entries (libcudart, libcupti, libgomp) resolve
# through its RPATH; -rpath-link lets the linker follow them here too.
target_link_libraries(mesa_anyjev_torch INTERFACE
  "${mesa_anyjev_torch_lib}/libtorch_cpu.so" "${mesa_anyjev_torch_lib}/libc10.so")
mesa_anyjev_rpaths(mesa_anyjev_torch "${mesa_anyjev_torch_lib}"
  ${MESA_ANYJEV_NVIDIA_LIB_DIRS})
if(MESA_ANYJEV_CROSS_CUDA)
  # Our kernels for the GB10: the cross nvcc of scripts/install.sh
  # --arm64-cuda (the host's nvcc over a targets/aarch64-linux of the aarch64
  # compiler wheels), the target's g++ compiling its host code, sm_120
  # machine code (the GB10's sm_121 runs it).
  set(mesa_anyjev_cross_nvcc "${MESA_ANYJEV_TORCH_ROOT}/cuda-13.0/bin/nvcc")
  if(NOT EXISTS "${mesa_anyjev_cross_nvcc}")
    message(FATAL_ERROR "libtorch for ${CMAKE_SYSTEM_PROCESSOR}: ${mesa_anyjev_cross_nvcc} "
      "is missing; run scripts/install.sh --arm64-cuda")
  endif()
  set(CMAKE_CUDA_COMPILER "${mesa_anyjev_cross_nvcc}" CACHE FILEPATH "" FORCE)
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "" FORCE)
  set(CMAKE_CUDA_FLAGS "-target-dir aarch64-linux" CACHE STRING "" FORCE)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 120)
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  enable_language(CUDA)
  set(MESA_ANYJEV_CUDA_BUILD ON)
  add_library(mesa_anyjev_torch_cuda INTERFACE)
  # As natively: the nvidia wheels' headers first, then the compiler
  # wheels' (crt/, which the runtime's cuda_runtime.h includes), here their
  # aarch64 builds.
  target_include_directories(mesa_anyjev_torch_cuda SYSTEM BEFORE INTERFACE
    ${MESA_ANYJEV_NVIDIA_INCLUDE_DIRS})
  target_include_directories(mesa_anyjev_torch_cuda SYSTEM INTERFACE
    "${MESA_ANYJEV_TORCH_ROOT}/cuda-13.0/targets/aarch64-linux/include")
  find_library(mesa_anyjev_cross_cudart NAMES libcudart.so.13
    PATHS ${MESA_ANYJEV_NVIDIA_LIB_DIRS} NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(mesa_anyjev_torch_cuda INTERFACE mesa_anyjev_torch
    "-Wl,--no-as-needed" "${mesa_anyjev_torch_lib}/libtorch_cuda.so" "-Wl,--as-needed"
    "${mesa_anyjev_torch_lib}/libc10_cuda.so" "${mesa_anyjev_cross_cudart}")
  message(STATUS "libtorch: ${mesa_anyjev_torch_lib} (cross-compiled, with libtorch_cuda)")
else()
  set(MESA_ANYJEV_CUDA_BUILD OFF)
  message(STATUS "libtorch: ${mesa_anyjev_torch_lib} (cross-compiled, CPU only)")
endif()
