// Probe: when does a context enter the state in which submitted -> start is ~0.19 us longer?
// The project's fe_trace.cu (CUPTI as the calibration set was taken), plus one scenario:
//   ms_probe seq OUT.jsonl pattern=ABAB... [streams=N] [sync=1] [ns=0] [grid=1] [block=32]
// One kernel per letter of `pattern`, on stream A, B, C, ... (`streams` created, at least as
// many as the letters used); sync=1 waits for each kernel (cudaStreamSynchronize) before the
// next launch, sync=0 issues all and waits at the end. Any other scenario is fe_trace's.
// Build: nvcc -O2 -arch=sm_90 ms_probe.cu -I.../CUPTI/include -lcupti (see record.sh)
#include <algorithm>
#define main fe_trace_main
#include "../../fe_trace.cu"
#undef main

static void sc_seq() {
  std::string pattern = g_args.count("pattern") ? g_args["pattern"] : "A";
  long sync = arg("sync", 1), ns = arg("ns", 0);
  int grid = arg("grid", 1), block = arg("block", 32);
  long used = 0;
  for (char c : pattern) used = std::max<long>(used, c - 'A' + 1);
  long n = std::max(arg("streams", used), used);
  std::vector<cudaStream_t> st(n);
  for (auto &s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  meta("rep_begin", "");
  for (char c : pattern) {
    cudaStream_t s = st[c - 'A'];
    launch_work(ns, s, grid, block);
    if (sync) CK(cudaStreamSynchronize(s));
  }
  CK(cudaDeviceSynchronize());
  meta("rep_end", "");
}

// gap2: A streams, each n dependent kernels queued behind its own gate (as fe_trace2's
// actgap); stream 0's kernels spin ns0, the others' ns (0: empty).
static void sc_gap2() {
  long A = arg("A", 2), n = arg("n", 200), gate = arg("gate", 20000000), ns0 = arg("ns0", 0),
       ns = arg("ns", 0);
  std::vector<cudaStream_t> st(A);
  for (auto &s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto &s : st) k_empty<<<1, 32, 0, s>>>();
  CK(cudaDeviceSynchronize());
  meta("rep_begin", "");
  for (long i = 0; i < A; i++) k_gate<<<1, 32, 0, st[i]>>>((uint64_t)gate);
  for (long j = 0; j < n; j++)
    for (long i = 0; i < A; i++) launch_work(i == 0 ? ns0 : ns, st[i]);
  meta("issued", "");
  CK(cudaDeviceSynchronize());
  meta("rep_end", "");
}

int main(int argc, char **argv) {
  if (argc < 3 || (std::string(argv[1]) != "seq" && std::string(argv[1]) != "gap2"))
    return fe_trace_main(argc, argv);
  g_out = fopen(argv[2], "w");
  if (!g_out) { perror(argv[2]); return 2; }
  std::string params;
  for (int i = 3; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    if (!eq) { fprintf(stderr, "bad argument %s\n", argv[i]); return 2; }
    g_args[std::string(argv[i], eq - argv[i])] = eq + 1;
    params += (params.empty() ? "" : ",") + std::string("\"") + std::string(argv[i], eq - argv[i]) + "\":\"" + (eq + 1) + "\"";
  }
  cupti_start();
  CK(cudaFree(0));
  const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char buf[8192];
  snprintf(buf, sizeof buf, "\"scenario\":\"%s\",\"max_connections\":\"%s\",\"params\":{%s}",
           argv[1], conn ? conn : "default", params.c_str());
  meta("header", buf);
  if (std::string(argv[1]) == "seq") sc_seq();
  else sc_gap2();
  cupti_flush();
  meta("footer", "");
  fclose(g_out);
  return 0;
}
