/* MKL's Intel code paths on a non-Intel CPU, for benchmarks only.

   The MKL inside torch's CPU wheels picks its kernels by CPU vendor: on AMD it runs the
   generic variants (torch.sparse.mm on a CSR tensor calls mkl_sparse_s_csr_ng_n_mm_c_ker_i4_def),
   on Intel the AVX-512 ones (..._avx512), about 2x faster on the same Zen 4 core.  The vendor
   test is the exported, interposable mkl_serv_intel_cpu_true; preloading this file answers
   "yes", so an AMD machine can time torch as it runs on an Intel CPU of the same ISA:

       gcc -shared -fPIC -O2 -o /tmp/libmkl_intel_path.so benchmarks/mkl_intel_path.c
       LD_PRELOAD=/tmp/libmkl_intel_path.so python benchmarks/bench_propagate.py ...

   The benchmark JSON records LD_PRELOAD and torch_mkl_intel_path.  Nothing in ldpfast uses it. */
int mkl_serv_intel_cpu_true(void) { return 1; }
int mkl_serv_intel_cpu(void) { return 1; }
