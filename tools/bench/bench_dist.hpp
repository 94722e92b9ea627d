// tensorctl bench --only dist (bench_dist.cpp): tensor::dist's all_reduce against a raw
// MPI_Allreduce, under mpirun.
#pragma once

namespace tensor_bench {
// 0 on success; 2 (usage) outside an MPI group of two or more processes.
int run_dist(bool quick);
}  // namespace tensor_bench
