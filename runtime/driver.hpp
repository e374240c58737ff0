// The CUDA Driver API, loaded at run time with dlopen. The library links no libcuda, so it loads (and its
// CPU-only parts, NVRTC compilation and the cache, work) on machines without a GPU driver.
#pragma once

#include <cuda.h>

#include <string>

namespace fa4::detail {

// Every driver entry point the library uses. The member names are the header's names, which cuda.h may
// map to versioned symbols (cuMemAlloc -> cuMemAlloc_v2); dlsym looks up that same versioned symbol, so
// each pointer has exactly the ABI the header declares.
#define FA4_DRIVER_FUNCTIONS(X)                                                             \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                     \
  X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceTotalMem) \
  X(cuDeviceGetUuid) X(cuDeviceGetPCIBusId) X(cuDeviceGetByPCIBusId)                         \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                                  \
  X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)    \
  X(cuCtxGetId) X(cuCtxSynchronize)                                                         \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamGetCtx)             \
  X(cuStreamIsCapturing) X(cuStreamBeginCapture) X(cuStreamEndCapture)                      \
  X(cuStreamGetCaptureInfo) X(cuThreadExchangeStreamCaptureMode)                             \
  X(cuUserObjectCreate) X(cuUserObjectRelease) X(cuGraphRetainUserObject)                   \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)            \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                              \
  X(cuFuncSetAttribute) X(cuLaunchKernelEx)                                                  \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD8Async) \
  X(cuTensorMapEncodeTiled)                                                                 \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)

struct DriverApi {
#define FA4_DECLARE_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  FA4_DRIVER_FUNCTIONS(FA4_DECLARE_DRIVER_MEMBER)
#undef FA4_DECLARE_DRIVER_MEMBER
};

// True when libcuda.so.1 loads, cuInit succeeds and at least one device exists. Never throws.
bool driver_available();
// Why driver_available() is false (for SKIPPED messages); empty when it is true.
std::string driver_unavailable_reason();
// The loaded driver; throws fa4::Error(cuda_error) when it is not available.
const DriverApi& driver();

// Compute capability x10 (90 for sm_90, 100 for sm_100) of a device.
int device_arch(CUdevice device);

// Throws fa4::Error(cuda_error) naming `what` and the driver's error name and text.
void check_cu(CUresult result, const char* what);

}  // namespace fa4::detail

// Calls a driver function through the loaded table and throws on failure, e.g. FA4_CU(cuCtxSynchronize()).
#define FA4_CU(call) ::fa4::detail::check_cu(::fa4::detail::driver().call, #call)
