// Probe sm_placement: on which SM each block runs, for fe_trace2's actgap with hi= and
// load= (A dependent chains of n stamping kernels at 16 connections, each behind its own
// gate; K of them of the greatest priority; a low-priority full-GPU load of W waves of 2 x
// 1024-thread blocks an SM, each block spinning lns ns, starting `lead` ns before the chains'
// gates end). Every kernel's thread 0 writes %smid and %globaltimer: the gates (SM, start,
// end), the chain kernels (SM, start), the load's blocks (SM, start, end). No CUPTI.
//   sm_place OUT.json A=4 hi=1 n=200 gate=20000000 W=100 lns=20000 lead=200000 reps=2
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include <map>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ uint64_t gt() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint32_t smid() { uint32_t r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }

// gate: thread 0 writes SM, start, end
__global__ void k_gate3(uint64_t ns, uint64_t *rec) {
  uint64_t t0 = gt(), t;
  while ((t = gt()) - t0 < ns) {}
  if (rec && threadIdx.x == 0) { rec[0] = smid(); rec[1] = t0; rec[2] = t; }
}
// chain kernel: thread 0 writes SM and start
__global__ void k_stamp2(uint64_t *rec) {
  if (threadIdx.x == 0) { rec[0] = smid(); rec[1] = gt(); }
}
// load: every thread spins ns; thread 0 of each block writes SM, start, end
__global__ void k_load(uint64_t ns, uint64_t *rec) {
  uint64_t t0 = gt(), t;
  while ((t = gt()) - t0 < ns) {}
  if (rec && threadIdx.x == 0) { uint64_t *r = rec + 3 * blockIdx.x; r[0] = smid(); r[1] = t0; r[2] = t; }
}

static std::map<std::string, long> args;
static long arg(const char *k, long d) { auto it = args.find(k); return it == args.end() ? d : it->second; }

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: sm_place OUT.json key=value ...\n"); return 2; }
  for (int i = 2; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    if (!eq) { fprintf(stderr, "bad argument %s\n", argv[i]); return 2; }
    args[std::string(argv[i], eq - argv[i])] = atol(eq + 1);
  }
  long A = arg("A", 4), hi = arg("hi", 1), n = arg("n", 200), gate = arg("gate", 20000000);
  long W = arg("W", 100), lns = arg("lns", 20000), lead = arg("lead", 200000), reps = arg("reps", 2);
  int lo_p, hi_p, sms;
  CK(cudaDeviceGetStreamPriorityRange(&lo_p, &hi_p));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<cudaStream_t> st(A);
  for (long i = 0; i < A; i++)
    CK(cudaStreamCreateWithPriority(&st[i], cudaStreamNonBlocking, i < hi ? hi_p : lo_p));
  cudaStream_t ls;
  CK(cudaStreamCreateWithPriority(&ls, cudaStreamNonBlocking, lo_p));
  long blocks = W * 2 * sms;
  size_t gwords = 3 * A, cwords = 2 * A * n, lwords = 3 * blocks;
  uint64_t *g, *c, *l;
  CK(cudaMalloc(&g, gwords * 8)); CK(cudaMalloc(&c, cwords * 8)); CK(cudaMalloc(&l, lwords * 8));
  // every kernel loaded before the reps (lazy loading: probe third_recording)
  for (auto &s : st) { k_gate3<<<1, 32, 0, s>>>(0, nullptr); k_stamp2<<<1, 32, 0, s>>>(c); }
  k_gate3<<<1, 32, 0, ls>>>(0, nullptr);
  k_load<<<1, 1024, 0, ls>>>(0, nullptr);
  CK(cudaDeviceSynchronize());
  FILE *out = fopen(argv[1], "w");
  fprintf(out, "{\"sms\": %d, \"A\": %ld, \"hi\": %ld, \"n\": %ld, \"gate\": %ld, \"W\": %ld, \"lns\": %ld, \"lead\": %ld, "
               "\"connections\": \"%s\", \"reps\": [", sms, A, hi, n, gate, W, lns, lead,
          getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? getenv("CUDA_DEVICE_MAX_CONNECTIONS") : "");
  std::vector<uint64_t> hg(gwords), hc(cwords), hl(lwords);
  for (long r = 0; r < reps; r++) {
    CK(cudaMemset(g, 0, gwords * 8)); CK(cudaMemset(c, 0, cwords * 8)); CK(cudaMemset(l, 0, lwords * 8));
    CK(cudaDeviceSynchronize());
    for (long i = 0; i < A; i++) k_gate3<<<1, 32, 0, st[i]>>>((uint64_t)gate, g + 3 * i);
    k_gate3<<<1, 32, 0, ls>>>((uint64_t)(gate - lead), nullptr);
    k_load<<<(unsigned)blocks, 1024, 0, ls>>>((uint64_t)lns, l);
    for (long j = 0; j < n; j++)
      for (long i = 0; i < A; i++) k_stamp2<<<1, 32, 0, st[i]>>>(c + 2 * (i * n + j));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hg.data(), g, gwords * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), c, cwords * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), l, lwords * 8, cudaMemcpyDeviceToHost));
    fprintf(out, "%s{\"gates\": [", r ? ", " : "");
    for (long i = 0; i < A; i++)
      fprintf(out, "%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)hg[3 * i],
              (unsigned long long)hg[3 * i + 1], (unsigned long long)hg[3 * i + 2]);
    fprintf(out, "], \"chains\": [");
    for (long i = 0; i < A; i++) {
      fprintf(out, "%s[", i ? ", " : "");
      for (long j = 0; j < n; j++)
        fprintf(out, "%s[%llu, %llu]", j ? ", " : "", (unsigned long long)hc[2 * (i * n + j)],
                (unsigned long long)hc[2 * (i * n + j) + 1]);
      fprintf(out, "]");
    }
    fprintf(out, "], \"load\": [");
    for (long b = 0; b < blocks; b++)
      fprintf(out, "%s[%llu, %llu, %llu]", b ? ", " : "", (unsigned long long)hl[3 * b],
              (unsigned long long)hl[3 * b + 1], (unsigned long long)hl[3 * b + 2]);
    fprintf(out, "]}");
  }
  fprintf(out, "]}\n");
  fclose(out);
  CK(cudaGetLastError());
  return 0;
}
