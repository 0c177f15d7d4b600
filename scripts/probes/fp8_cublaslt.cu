// Which FP8 (E4M3 x E4M3) cuBLASLt configurations run on this GPU?
// nvcc -gencode=arch=compute_90a,code=sm_90a fp8_cublaslt.cu -lcublasLt -o probe && ./probe
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cstdio>
#include <vector>

int main() {
    cublasLtHandle_t h;
    cublasLtCreate(&h);
    const int m = 4096, n = 512, k = 4096;  // D[m x n] = A^T[m x k] * B[k x n]
    void *a, *b, *d, *ws;
    float* scales;
    cudaMalloc(&a, size_t(m) * k);
    cudaMalloc(&b, size_t(n) * k);
    cudaMalloc(&d, size_t(m) * n * 4);
    cudaMalloc(&ws, 32 << 20);
    cudaMalloc(&scales, 64);
    std::vector<float> one(16, 1.f);  // [8]: beta = 0 for the device pointer mode
    one[8] = 0;
    cudaMemcpy(scales, one.data(), 64, cudaMemcpyHostToDevice);
    cudaMemset(a, 0x38, size_t(m) * k);  // 1.0 in e4m3
    cudaMemset(b, 0x38, size_t(n) * k);
    for (int dtype : {0, 1})
        for (int fast : {0, 1})
            for (int c_null : {0, 1})
                for (int scale : {0, 1, 2, 3, 4}) {
                    cudaDataType_t dt = dtype ? CUDA_R_16BF : CUDA_R_32F;
                    cublasLtMatmulDesc_t desc;
                    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
                    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
                    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
                    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
                    int8_t fa = fast;
                    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa);
                    // scale 1: A and B scales, B's 4-byte aligned; 2: both 16-byte aligned;
                    // 3: A's only; 4: alpha from device memory, no scales
                    const float* sa = scales;
                    const float* sb = scale == 1 ? scales + 1 : scales + 4;
                    if (scale == 1 || scale == 2 || scale == 3)
                        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
                    if (scale == 1 || scale == 2)
                        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
                    if (scale == 4) {
                        cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
                        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
                    }
                    cublasLtMatrixLayout_t la, lb, lc, ld;
                    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
                    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
                    cublasLtMatrixLayoutCreate(&lc, dt, m, n, m);
                    cublasLtMatrixLayoutCreate(&ld, dt, m, n, m);
                    cublasLtMatmulPreference_t pref;
                    cublasLtMatmulPreferenceCreate(&pref);
                    uint64_t wsb = 32 << 20;
                    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
                    cublasLtMatmulHeuristicResult_t res[8];
                    int found = 0;
                    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 8, res, &found);
                    std::printf("D=%s fast=%d C=%s scale=%d: heuristic %s found %d;", dtype ? "bf16" : "f32", fast,
                                c_null ? "null" : "D", scale, cublasLtGetStatusString(hs), found);
                    for (int i = 0; i < found && i < 2; ++i) {
                        float alpha = 1, beta = 0;
                        const float* pa = scale == 4 ? scales : &alpha;
                        const float* pb = scale == 4 ? scales + 8 : &beta;
                        cublasStatus_t ms = cublasLtMatmul(h, desc, pa, a, la, b, lb, pb, c_null ? nullptr : d, lc, d,
                                                           ld, &res[i].algo, ws, wsb, 0);
                        cudaError_t e = cudaDeviceSynchronize();
                        float v = 0;
                        if (dtype == 0) cudaMemcpy(&v, d, 4, cudaMemcpyDeviceToHost);
                        std::printf(" [%d %s %s ws=%zu v=%g]", i, cublasLtGetStatusString(ms), cudaGetErrorString(e),
                                    res[i].workspaceSize, v);
                    }
                    std::printf("\n");
                    cublasLtMatmulPreferenceDestroy(pref);
                    cublasLtMatrixLayoutDestroy(la);
                    cublasLtMatrixLayoutDestroy(lb);
                    cublasLtMatrixLayoutDestroy(lc);
                    cublasLtMatrixLayoutDestroy(ld);
                    cublasLtMatmulDescDestroy(desc);
                }
    int ver = cublasLtGetVersion();
    std::printf("cublasLt version %d\n", ver);
}
