# The one place that finds libtorch: defines `mesa_anyjev_torch`, the
# INTERFACE target everything that uses libtorch links.
#
# Natively: the PyPI torch wheel's own CMake config (the Makefile passes
# torch.utils.cmake_prefix_path). Cross-compiling (cmake/aarch64-linux-gnu.cmake,
# `make check-arm64`): that config refuses ("uses CUDA but I cannot find the
# CUDA libraries"), so the target is built from the aarch64 wheel unpacked
# by `scripts/install.sh --arm64` (MESA_ANYJEV_TORCH_ROOT): libtorch_cpu and
# c10, plus c10_cuda and the nvidia wheel's libcudart for the CUDA calls the
# code makes (allocator statistics, the device probe), not libtorch_cuda,
# which would need gigabytes of aarch64 nvidia wheels at run time. Without
# libtorch_cuda, CUDA is not available to such a build: it runs on the CPU.

if(NOT CMAKE_CROSSCOMPILING)
  # A CUDA wheel's config probes the GPU with try_run unless the architectures
  # are named; build hosts have no GPU. 9.0 = H100/H200, 12.0 = GB10 (sm_121
  # runs sm_120 code). CMake 3.25 knows no CUDA20 dialect for nvcc.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "9.0;12.0")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  find_package(Torch REQUIRED)
  message(STATUS "libtorch: ${Torch_DIR} (version ${Torch_VERSION})")
  # A CUDA wheel's libtorch needs the nvidia-* wheels' libraries (NCCL, cuDNN,
  # cuBLAS, ...), not the older copies of the system CUDA toolkit: search the
  # wheels' folders first when linking and when loading, so every CUDA
  # library resolves to one set.
  get_filename_component(MESA_ANYJEV_SITE_PACKAGES "${Torch_DIR}/../../../.." ABSOLUTE)
  file(GLOB MESA_ANYJEV_WHEEL_LIB_DIRS LIST_DIRECTORIES true
    "${MESA_ANYJEV_SITE_PACKAGES}/nvidia/*/lib")
  add_library(mesa_anyjev_torch INTERFACE)
  target_link_libraries(mesa_anyjev_torch INTERFACE torch)
  foreach(dir ${MESA_ANYJEV_WHEEL_LIB_DIRS})
    target_link_options(mesa_anyjev_torch INTERFACE
      "LINKER:-rpath-link,${dir}" "LINKER:-rpath,${dir}")
  endforeach()
  return()
endif()

set(MESA_ANYJEV_TORCH_ROOT "/opt/mesa-anyjev/arm64" CACHE PATH
  "The unpacked torch wheel (torch/, nvidia/) of the target architecture")
set(MESA_ANYJEV_CUDA_INCLUDE "/usr/local/cuda/include" CACHE PATH
  "CUDA runtime headers (architecture-independent)")
set(mesa_anyjev_torch_lib "${MESA_ANYJEV_TORCH_ROOT}/torch/lib")
file(GLOB mesa_anyjev_cudart "${MESA_ANYJEV_TORCH_ROOT}/nvidia/*/lib/libcudart.so.*")
foreach(needed "${mesa_anyjev_torch_lib}/libtorch_cpu.so" "${mesa_anyjev_torch_lib}/libc10.so"
    "${mesa_anyjev_torch_lib}/libc10_cuda.so" "${MESA_ANYJEV_CUDA_INCLUDE}/cuda_runtime_api.h")
  if(NOT EXISTS "${needed}")
    message(FATAL_ERROR "libtorch for ${CMAKE_SYSTEM_PROCESSOR}: ${needed} is missing; "
      "run scripts/install.sh --arm64 (or set MESA_ANYJEV_TORCH_ROOT, "
      "MESA_ANYJEV_CUDA_INCLUDE)")
  endif()
endforeach()
if(NOT mesa_anyjev_cudart)
  message(FATAL_ERROR "libtorch for ${CMAKE_SYSTEM_PROCESSOR}: no libcudart.so.* under "
    "${MESA_ANYJEV_TORCH_ROOT}/nvidia; run scripts/install.sh --arm64")
endif()
list(GET mesa_anyjev_cudart 0 mesa_anyjev_cudart)
get_filename_component(mesa_anyjev_cudart_dir "${mesa_anyjev_cudart}" DIRECTORY)
message(STATUS "libtorch: ${mesa_anyjev_torch_lib} (cross-compiled, CPU only at run time)")
add_library(mesa_anyjev_torch INTERFACE)
# -isystem as the wheel's config does: its headers are not held to our warnings.
target_include_directories(mesa_anyjev_torch SYSTEM INTERFACE
  "${MESA_ANYJEV_TORCH_ROOT}/torch/include"
  "${MESA_ANYJEV_TORCH_ROOT}/torch/include/torch/csrc/api/include"
  "${MESA_ANYJEV_CUDA_INCLUDE}")
target_compile_features(mesa_anyjev_torch INTERFACE cxx_std_20)
# libtorch_cpu's own NEEDED entries (libcupti, libgomp) resolve through its
# RPATH; -rpath-link lets the linker follow them here too.
target_link_libraries(mesa_anyjev_torch INTERFACE
  "${mesa_anyjev_torch_lib}/libtorch_cpu.so" "${mesa_anyjev_torch_lib}/libc10_cuda.so"
  "${mesa_anyjev_torch_lib}/libc10.so" "${mesa_anyjev_cudart}")
target_link_options(mesa_anyjev_torch INTERFACE
  "LINKER:-rpath-link,${mesa_anyjev_torch_lib}"
  "LINKER:-rpath-link,${mesa_anyjev_cudart_dir}" "LINKER:-rpath,${mesa_anyjev_torch_lib}"
  "LINKER:-rpath,${mesa_anyjev_cudart_dir}")
