// Microbenchmark, built by hand with nvcc on a GPU machine (not by CMake: CI has no nvcc):
//   nvcc -O3 -arch=sm_90a -o red_epilogue bench/micro/red_epilogue.cu && ./red_epilogue
// The split-K epilogue of lesson 09 alone: 128 blocks (4 x 8 x 4 splits) of 256 threads, each
// adding a 128 x 256 f32 accumulator (wgmma m64n256 layout, 2 warpgroups) into a 1024 x 1024
// f32 C, with scalar red.f32, with red.global.add.v2.f32, and with plain 8-byte stores. It
// decided that paired atomics (passes/PairElementWrites.h) were worth building.
#include <cstdio>
#include <cuda_runtime.h>
template <int Mode>
__global__ void epi(float* C, int N) {
  int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  int bx = blockIdx.x, by = blockIdx.y;
  float v = 1.0f + blockIdx.z;
#pragma unroll
  for (int q = 0; q < 64; ++q) {
    int row = by * 128 + (w / 4) * 64 + (w % 4) * 16 + lane / 4 + (q % 2) * 8;
    int col = bx * 256 + (q / 2) * 8 + (lane % 4) * 2;
    float* p = C + (size_t)row * N + col;
    if (Mode == 0) {
      atomicAdd(p, v);
      atomicAdd(p + 1, v);
    }
    if (Mode == 1)
      asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v), "f"(v) : "memory");
    if (Mode == 2) *reinterpret_cast<float2*>(p) = make_float2(v, v);
  }
}
int main() {
  int N = 1024;
  float* C;
  cudaMalloc(&C, N * N * 4);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const char* names[] = {"red.f32 x2", "red.v2.f32", "st.v2 (no atomics)"};
  for (int m = 0; m < 3; ++m) {
    for (int r = 0; r < 3; ++r) {
      cudaMemset(C, 0, N * N * 4);
      cudaEventRecord(a);
      for (int i = 0; i < 20; ++i) {
        if (m == 0) epi<0><<<dim3(4, 8, 4), 256>>>(C, N);
        if (m == 1) epi<1><<<dim3(4, 8, 4), 256>>>(C, N);
        if (m == 2) epi<2><<<dim3(4, 8, 4), 256>>>(C, N);
      }
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      float h;
      cudaMemcpy(&h, C + 5 * N + 7, 4, cudaMemcpyDeviceToHost);
      printf("%-20s %.2f us per launch  (C[5][7] = %g)\n", names[m], ms * 1000 / 20, h);
    }
  }
  return 0;
}
