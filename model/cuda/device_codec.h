#pragma once
// fp32 <-> the element types our CUDA kernels read and write (fp32, bf16, fp16); they compute in fp32.
// nvcc only (CUDA's own headers).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mygpt::cuda_kernels {

template <typename T>
struct DeviceCodec;
template <>
struct DeviceCodec<float> {
  __host__ __device__ static float to_float(float v) { return v; }
  __host__ __device__ static float from_float(float v) { return v; }
};
template <>
struct DeviceCodec<__nv_bfloat16> {
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16(v); }
};
template <>
struct DeviceCodec<__half> {
  __host__ __device__ static float to_float(__half v) { return __half2float(v); }
  __host__ __device__ static __half from_float(float v) { return __float2half(v); }
};

}  // namespace mygpt::cuda_kernels
