#!/usr/bin/env bash
# Issue 5's comparison: every GEMM and convolution problem of the suite judged against torch.compile
# max-autotune-no-cudagraphs (eager timed beside it in the same interleaved rounds), over as many device calls as
# it takes. Each call unpacks the state the last one brought back (carry bench-out/state.tgz) and goes on.
#
#   scripts/gpu_max_autotune.sh SECONDS PER_GPU        (on the device, from the repo root)
set -uo pipefail
seconds=${1:-510} per_gpu=${2:-4}
[ -f bench-out/state.tgz ] && tar xzf bench-out/state.tgz
l1=suite/level1 l2=suite/level2
gemms=($l1/{1_Square_matmul,2_Rectangular_matmul,3_Batched_matmul,4_Matrix_vector_multiplication,5_Matmul_with_large_K,6_Matmul_with_small_K,7_Tall_skinny_matmul,8_3D_tensor_matrix_multiplication,9_4D_tensor_matrix_multiplication,10_Matmul_with_transposed_A,11_Matmul_with_transposed_B,12_Matmul_for_lower_triangular_matrices,13_Matmul_with_diagonal_matrix}.py
       $l2/{20,21,22,23,24,25,26,27,28,29,31}_*.py)
convs=($l1/{50,51}_conv_*.py
       $l2/{2,3,7,12,18}_*.py            # the norms after a convolution (early in the third call: a channels-last variant)
       $l1/{52,53,54,55,56,57,58,59,60,61}_conv_*.py
       $l2/{1,5,6,8,9,10,11,13,14,15,16,30,4,17,19}_*.py)
exec scripts/gpu_bench.sh bench-out/st "$seconds" "$per_gpu" "${gemms[@]}" "${convs[@]}" \
    --compile-modes max-autotune-no-cudagraphs --timeout 600
