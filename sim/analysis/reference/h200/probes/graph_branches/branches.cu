// Probe graph_branches: when does each branch of a multi-branch CUDA graph start, with and
// without CUPTI? A graph of B independent branches (each a chain of N kernels that stamp
// %globaltimer at their start and end and spin NS ns between), captured from B streams
// forked from one and joined back (as PyTorch captures a two-stream step), the branches'
// kernels issued branch after branch (order=0) or round robin (order=1). Launched REPS
// times, each synchronised; one JSON line a launch: the launch call's and the sync's host
// time, and for every branch its first kernel's start and its last kernel's end (ns, from
// the launch's first kernel start) and its median start-to-start gap less NS.
// With cupti=1 CUPTI's activity records are on (kernels, runtime calls), as fe_trace's.
// Build: nvcc -O2 -arch=sm_90 branches.cu -I$CUPTI/include -L$CUPTI/lib64 -lcupti -o branches
// Run:   ./branches B N NS ORDER CUPTI REPS > out.jsonl
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void k_stampspin(unsigned long long *st, unsigned long long ns) {
  if (threadIdx.x == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    st[0] = t0;
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    st[1] = t;
  }
}

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *max_rec) {
  *size = 1 << 22; *buf = (uint8_t *)aligned_alloc(8, *size); *max_rec = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *buf, size_t, size_t) { free(buf); }

int main(int argc, char **argv) {
  if (argc < 7) { fprintf(stderr, "usage: branches B N NS ORDER CUPTI REPS\n"); return 2; }
  int B = atoi(argv[1]), N = atoi(argv[2]), order = atoi(argv[4]), cupti = atoi(argv[5]),
      reps = atoi(argv[6]);
  unsigned long long ns = strtoull(argv[3], 0, 10);
  if (cupti) {
    cuptiActivityRegisterCallbacks(buf_req, buf_done);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  CK(cudaFree(0));
  unsigned long long *st;
  size_t words = (size_t)B * N * 2;
  CK(cudaMalloc(&st, words * 8));
  std::vector<cudaStream_t> s(B + 1);
  for (auto &x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  cudaEvent_t fork, join[64];
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int b = 0; b < B; b++) CK(cudaEventCreateWithFlags(&join[b], cudaEventDisableTiming));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
  CK(cudaEventRecord(fork, s[0]));
  for (int b = 0; b < B; b++) CK(cudaStreamWaitEvent(s[b + 1], fork, 0));
  if (order == 0) {
    for (int b = 0; b < B; b++)
      for (int i = 0; i < N; i++) k_stampspin<<<1, 32, 0, s[b + 1]>>>(st + 2 * (b * N + i), ns);
  } else {
    for (int i = 0; i < N; i++)
      for (int b = 0; b < B; b++) k_stampspin<<<1, 32, 0, s[b + 1]>>>(st + 2 * (b * N + i), ns);
  }
  for (int b = 0; b < B; b++) { CK(cudaEventRecord(join[b], s[b + 1])); CK(cudaStreamWaitEvent(s[0], join[b], 0)); }
  CK(cudaStreamEndCapture(s[0], &g));
  cudaGraphExec_t x;
  CK(cudaGraphInstantiate(&x, g, 0));
  CK(cudaGraphUpload(x, s[0]));
  CK(cudaStreamSynchronize(s[0]));
  std::vector<unsigned long long> h(words);
  using clk = std::chrono::steady_clock;
  for (int r = -2; r < reps; r++) {           // two warm-up launches
    auto a = clk::now();
    CK(cudaGraphLaunch(x, s[0]));
    auto b_ = clk::now();
    CK(cudaStreamSynchronize(s[0]));
    auto c = clk::now();
    if (r < 0) continue;
    CK(cudaMemcpy(h.data(), st, words * 8, cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull;
    for (size_t i = 0; i < words; i += 2) t0 = std::min(t0, h[i]);
    printf("{\"B\":%d,\"N\":%d,\"ns\":%llu,\"order\":%d,\"cupti\":%d,\"rep\":%d,\"launch_ns\":%lld,"
           "\"sync_ns\":%lld,\"branches\":[", B, N, ns, order, cupti, r,
           (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(b_ - a).count(),
           (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(c - b_).count());
    for (int b = 0; b < B; b++) {
      unsigned long long *p = &h[2 * b * N];
      std::vector<long long> gaps;
      for (int i = 1; i < N; i++) gaps.push_back((long long)(p[2 * i] - p[2 * i - 2]) - (long long)ns);
      std::sort(gaps.begin(), gaps.end());
      printf("%s{\"first\":%llu,\"last_end\":%llu,\"gap\":%lld}", b ? "," : "", p[0] - t0,
             p[2 * N - 1] - t0, gaps.empty() ? 0LL : gaps[gaps.size() / 2]);
    }
    printf("]}\n");
  }
  if (cupti) cuptiActivityFlushAll(1);
  return 0;
}
