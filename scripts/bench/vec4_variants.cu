// How a memory-bound pointwise kernel should be launched for 1.6e9 floats (6.4 GB, the LeakyReLU seed):
// grid-stride loops of various grids vs one or two float4 per thread. Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 scripts/bench/vec4_variants.cu -o /tmp/v && /tmp/v
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ float leaky(float x) { return x > 0.f ? x : x * 0.01f; }
__device__ __forceinline__ float4 leaky4(float4 v) { return make_float4(leaky(v.x), leaky(v.y), leaky(v.z), leaky(v.w)); }

__global__ void grid_stride(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < groups; q += stride) out[q] = leaky4(in[q]);
}

__global__ void grid_stride_x2(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; q + stride < groups; q += 2 * stride) {
        const float4 a = in[q], b = in[q + stride];
        out[q] = leaky4(a);
        out[q + stride] = leaky4(b);
    }
    if (q < groups) out[q] = leaky4(in[q]);
}

template <int PER_THREAD>
__global__ void one_shot(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t first = ((int64_t)blockIdx.x * blockDim.x) * PER_THREAD + threadIdx.x;
    float4 v[PER_THREAD];
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int64_t q = first + (int64_t)k * blockDim.x;
        if (q < groups) v[k] = in[q];
    }
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int64_t q = first + (int64_t)k * blockDim.x;
        if (q < groups) out[q] = leaky4(v[k]);
    }
}

int main() {
    const int64_t n = 4096LL * 393216LL, groups = n / 4;
    float *in, *out;
    cudaMalloc(&in, n * 4);
    cudaMalloc(&out, n * 4);
    cudaMemset(in, 0, n * 4);
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    auto time = [&](const char* name, auto launch) {
        for (int i = 0; i < 3; ++i) launch();
        float best = 1e9, total = 0;
        for (int i = 0; i < 10; ++i) {
            cudaEventRecord(a);
            launch();
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            float ms;
            cudaEventElapsedTime(&ms, a, b);
            best = ms < best ? ms : best;
            total += ms;
        }
        printf("%-40s min %.3f ms  mean %.3f ms  (%.0f GB/s)\n", name, best, total / 10, 2.0 * n * 4 / best / 1e6);
    };
    auto f4 = [](float* p) { return reinterpret_cast<float4*>(p); };
    for (int mult : {4, 8, 16, 32}) {
        char name[64];
        snprintf(name, sizeof name, "grid-stride, %d blocks/SM", mult);
        time(name, [&] { grid_stride<<<sms * mult, 256>>>(f4(in), f4(out), groups); });
        snprintf(name, sizeof name, "grid-stride x2, %d blocks/SM", mult);
        time(name, [&] { grid_stride_x2<<<sms * mult, 256>>>(f4(in), f4(out), groups); });
    }
    time("one float4 per thread", [&] { one_shot<1><<<(unsigned)((groups + 255) / 256), 256>>>(f4(in), f4(out), groups); });
    time("two float4 per thread", [&] { one_shot<2><<<(unsigned)((groups + 511) / 512), 256>>>(f4(in), f4(out), groups); });
    time("four float4 per thread", [&] { one_shot<4><<<(unsigned)((groups + 1023) / 1024), 256>>>(f4(in), f4(out), groups); });
    printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
