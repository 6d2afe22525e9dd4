// Probe graph_gaps: what sets the gap between two dependent kernels, in a CUDA graph and in a
// stream (issue 42: dependent real kernels sit ~270-420 ns apart in PyTorch's graphs against
// ~96 ns for fe_trace's empty ones). A chain of N kernels, each depending on the one before,
// of a given parameter block size (P bytes), grid (G blocks of 128 threads), dynamic shared
// memory (S bytes a block), work (each block spins NS ns) and number of distinct functions
// (K: node i runs the (i % K)th of K otherwise equal kernels) and memory traffic (per: each
// thread copies that many float4s, 16 bytes each, scaled by 2, as an elementwise kernel does), is run
//   - as a graph (captured from one stream; uploaded; launched REPS times, each synchronised);
//   - in a stream, queued behind a gate kernel that spins until every launch is made, so that
//     the chain runs GPU-bound as the graph does (REPS times).
// Each kernel stamps %globaltimer: the earliest start of its blocks and the latest end
// (atomicMin/atomicMax). One JSON line a configuration: the median, 10th and 90th percentile
// of the gap (a kernel's earliest block start less its predecessor's latest block end, ns)
// over the N-1 pairs of every repetition, and the median kernel length (earliest start to
// latest end). With CUPTI=1 CUPTI's activity records are on (kernels, runtime), as fe_trace's, and
// the line adds the median gap and length of CUPTI's k_work records (rec_gap_p50, rec_len_p50).
// Build: nvcc -O2 -arch=sm_90 gaps.cu -I$CUPTI/include -L$CUPTI/lib64 -lcupti -o gaps
// Run:   ./gaps CUPTI N REPS > out.jsonl
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

typedef unsigned long long u64;

__device__ __forceinline__ u64 now() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

template <int P> struct Params { unsigned char pad[P]; };

// F: which of four otherwise equal functions (a chain of K functions, node i the (i % K)th)
template <int P, int F>
__global__ void k_work(Params<P> p, u64 *start, u64 *end, u64 ns, const float4 *src, float4 *dst,
                       int per) {
  extern __shared__ unsigned char smem[];
  u64 t0 = now();
  if (threadIdx.x == 0) atomicMin(start, t0);
  u64 t = t0;
  while (t - t0 < ns) t = now();
  // memory-bound work: each thread copies `per` float4s (an elementwise kernel's traffic)
  size_t stride = (size_t)gridDim.x * blockDim.x, i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < per; j++) {
    float4 v = src[i0 + j * stride];
    dst[i0 + j * stride] = make_float4(v.x * 2, v.y * 2, v.z * 2, v.w * 2);
  }
  if (p.pad[P - 1] == 7 + F) smem[threadIdx.x] = 1; // the block reads its parameters
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(end, now());
}

__global__ void k_gate(volatile int *flag) { while (*flag == 0) {} }

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *max_rec) {
  *size = 1 << 22; *buf = (uint8_t *)aligned_alloc(8, *size); *max_rec = 0;
}
// CUPTI's records of k_work kernels since the configuration began: (start, end) ns
static std::vector<std::pair<u64, u64>> recs;
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *rec = 0;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    auto *k = (CUpti_ActivityKernel10 *)rec;
    if (strstr(k->name, "k_work")) { u64 a = k->start, b = k->end; recs.push_back({a, b}); }
  }
  free(buf);
}

// the memory-bound variant's arrays (MEM_BYTES each) and float4s a thread copies
static float4 *g_src, *g_dst;
static int g_per;
static const size_t MEM_BYTES = 64u << 20;

template <int P, int F>
void launch(int i, int G, int S, u64 ns, cudaStream_t s, u64 *st) {
  Params<P> p = {};
  k_work<P, F><<<G, 128, S, s>>>(p, st + 2 * i, st + 2 * i + 1, ns, g_src, g_dst, g_per);
}

typedef void (*launcher)(int, int, int, u64, cudaStream_t, u64 *);

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: gaps CUPTI N REPS\n"); return 2; }
  int cupti = atoi(argv[1]), N = atoi(argv[2]), reps = atoi(argv[3]);
  if (cupti) {
    cuptiActivityRegisterCallbacks(buf_req, buf_done);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  CK(cudaFree(0));
  int sizes[] = {8, 1024};
  launcher fns[2][4] = {{launch<8, 0>, launch<8, 1>, launch<8, 2>, launch<8, 3>},
                        {launch<1024, 0>, launch<1024, 1>, launch<1024, 2>, launch<1024, 3>}};
  u64 *st;
  CK(cudaMalloc(&st, (size_t)N * 2 * 8));
  int *flag;
  CK(cudaHostAlloc(&flag, 4, cudaHostAllocMapped));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<u64> h(2 * N);
  int grids[] = {1, 132, 528, 1024, 1320};
  int smems[] = {0};
  int kinds[] = {1, 2, 4};
  int pers[] = {0, 4, 16};
  CK(cudaMalloc(&g_src, MEM_BYTES));
  CK(cudaMalloc(&g_dst, MEM_BYTES));
  CK(cudaMemset(g_src, 0, MEM_BYTES));
  u64 works[] = {0, 2000};
  for (int per : pers)
  for (int pi = 0; pi < 2; pi++)
  for (int K : kinds)
  for (int G : grids)
  for (int S : smems)
  for (u64 ns : works)
  for (int graph = 0; graph < 2; graph++) {
    // the memory-bound chains: one parameter block, one function, no spin, 1,024 blocks
    // (PyTorch's elementwise kernels) besides the grids above
    if (per && (pi || K > 1 || ns)) continue;
    g_per = per;
    cudaGraphExec_t x = 0;
    if (graph) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < N; i++) fns[pi][i % K](i, G, S, ns, s, st);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&x, g, 0));
      CK(cudaGraphUpload(x, s));
      CK(cudaGraphDestroy(g));
    }
    std::vector<long long> gaps, lens;
    if (cupti) { cuptiActivityFlushAll(1); recs.clear(); }
    for (int r = -1; r < reps; r++) {            // one warm-up
      for (int i = 0; i < N; i++) { h[2 * i] = ~0ull; h[2 * i + 1] = 0; }
      CK(cudaMemcpy(st, h.data(), 2 * N * 8, cudaMemcpyHostToDevice));
      if (graph) {
        CK(cudaGraphLaunch(x, s));
      } else {
        *flag = 0;
        k_gate<<<1, 1, 0, s>>>(flag);
        for (int i = 0; i < N; i++) fns[pi][i % K](i, G, S, ns, s, st);
        __sync_synchronize();
        *flag = 1;
      }
      CK(cudaStreamSynchronize(s));
      if (r < 0) continue;
      CK(cudaMemcpy(h.data(), st, 2 * N * 8, cudaMemcpyDeviceToHost));
      for (int i = 0; i < N; i++) {
        lens.push_back((long long)(h[2 * i + 1] - h[2 * i]));
        if (i) gaps.push_back((long long)h[2 * i] - (long long)h[2 * i - 1]);
      }
    }
    if (graph) CK(cudaGraphExecDestroy(x));
    // CUPTI's view: gaps between consecutive records of one launch (under 50 us), lengths
    std::vector<long long> rgaps, rlens;
    if (cupti) {
      cuptiActivityFlushAll(1);
      std::sort(recs.begin(), recs.end());
      for (size_t i = 0; i < recs.size(); i++) {
        rlens.push_back((long long)(recs[i].second - recs[i].first));
        if (i) {
          long long g = (long long)recs[i].first - (long long)recs[i - 1].second;
          if (g < 50000) rgaps.push_back(g);
        }
      }
      std::sort(rgaps.begin(), rgaps.end());
      std::sort(rlens.begin(), rlens.end());
    }
    std::sort(gaps.begin(), gaps.end());
    std::sort(lens.begin(), lens.end());
    size_t n = gaps.size();
    printf("{\"cupti\":%d,\"graph\":%d,\"P\":%d,\"K\":%d,\"per\":%d,\"G\":%d,\"S\":%d,\"ns\":%llu,\"N\":%d,\"reps\":%d,"
           "\"gap_p50\":%lld,\"gap_p10\":%lld,\"gap_p90\":%lld,\"len_p50\":%lld,"
           "\"records\":%zu,\"rec_gap_p50\":%lld,\"rec_len_p50\":%lld}\n",
           cupti, graph, sizes[pi], K, per, G, S, ns, N, reps, gaps[n / 2], gaps[n / 10], gaps[n * 9 / 10],
           lens[lens.size() / 2], recs.size(), rgaps.empty() ? -1LL : rgaps[rgaps.size() / 2],
           rlens.empty() ? -1LL : rlens[rlens.size() / 2]);
    fflush(stdout);
  }
  if (cupti) cuptiActivityFlushAll(1);
  return 0;
}
