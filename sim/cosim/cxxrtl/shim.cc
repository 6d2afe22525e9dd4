// gpufe's loop around a FrontEnd compiled by Yosys CXXRTL (see sim/compiled.py).
//
// The same per-cycle procedure as sim/backend.py's PysimBackend, in C++, so that Python is
// entered per transaction: every cycle, `now` is set, due input transfers are offered (one
// per input stream, in order), outputs settle; an offered output transfer stops the run
// before the clock edge (Python reads the payloads, then the next run makes the edge);
// otherwise the edge, and taken inputs leave their queues. While the design is idle and
// nothing is due, the cycle counter jumps to the next due input.
//
// DMA reads are answered here, not in Python, once gpufe_dma_reads has been called: host
// memory is mirrored (gpufe_mem_map, gpufe_mem_write: every allocation and every write the
// host makes), and a read request offered is answered as the harness would (Harness._dma_read:
// the link's latency, one dword per step, the data path busy until the last) without a stop.
//
// Built apart from the design (design.cc, compiled once per parameter set, holds the CXXRTL
// C API), so that changing this loop does not recompile the design.
#include <chrono>
#include <cxxrtl/capi/cxxrtl_capi.h>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

extern "C" cxxrtl_toplevel cxxrtl_design_create();

namespace {

const int WORDS = 8;   // widest payload: 256 bits
const int STATUS_PAYLOADS = 4;   // the status block's first payload slot

struct Entry {
  uint64_t due;
  uint32_t w[WORDS];
};

struct Queue {
  cxxrtl_object *valid, *payload, *ready;
  std::deque<Entry> q;
};

// One allocation of host memory: its dwords from `start`, 0 past the last one written.
struct Region {
  uint64_t start, end;          // bytes [start, end)
  std::vector<uint32_t> dw;
};

// A field of a packed payload: bit offset and width (at most 64).
struct Field {
  unsigned off = 0, width = 0;
};

struct DmaReads {
  bool on = false;
  int stop = -1;                // the request stream's bit among the stop streams
  int queue = -1;               // the response stream's input queue
  cxxrtl_object *request = nullptr;
  Field address, count, tag;    // of the request
  unsigned r_data = 0, r_tag = 0, r_last = 0, r_error = 0;   // response field offsets
  uint64_t latency_ps = 0, step_ps = 0, free_ps = 0;
  uint64_t served = 0;
  std::vector<Region> regions;  // sorted by start, disjoint
};

struct Sim {
  cxxrtl_handle h;
  cxxrtl_object *clk, *now, *idle, *wake, *wr_ready, *wr_valid;
  std::vector<cxxrtl_object *> stops;
  std::vector<Queue> queues;
  std::vector<int> offered;
  int offers = 0;      // output streams offering a transfer at the last stop (bit per stop)
  uint64_t cycle = 0, write_ready_from = 0, cycle_ps = 1000;
  int jumps = 1, last_idle = 1, quiet = 1;
  // The last edge changed no state and took no input ("stable"): the design cannot change
  // until its inputs do. last_offered (bit per queue) and last_wr_ready are the inputs it saw.
  bool stable = false, last_wr_ready = false;
  uint32_t last_offered = 0;
  uint64_t clocked = 0, jumped = 0, njumps = 0, skipped = 0, nskips = 0;
  uint64_t run_ns = 0;    // wall time inside gpufe_run: the C side's share of a run
  // Python's status block (see gpufe_status): what the host reads after every stop, written
  // here so that reading it is not a call through ctypes each
  uint64_t *status = nullptr;
  std::vector<cxxrtl_object *> out_payloads;   // the stop streams' payloads, then dma_write's
  // A logged output stream (valid for one cycle, never held): its transfers are kept with
  // their cycle instead of stopping the run, and the run stops by `log_deadline` at the
  // latest, the first cycle at which the host could see the first of them (`log_horizon_ps`
  // after it), so that Python learns of each in time.
  cxxrtl_object *log_valid = nullptr, *log_payload = nullptr;
  uint64_t log_horizon_ps = 0, log_deadline = UINT64_MAX, log_stops = 0;
  std::vector<uint64_t> log;                   // cycle, payload (64 bits) pairs
  DmaReads dma;
};

size_t words(const cxxrtl_object *o) { return (o->width + 31) / 32; }

void put(cxxrtl_object *o, const uint32_t *w) {
  size_t n = words(o);
  memcpy(o->next, w, 4 * n);
  size_t top = o->width % 32;
  if (top)
    o->next[n - 1] &= (1u << top) - 1;
}

void put_u64(cxxrtl_object *o, uint64_t v) {
  uint32_t w[WORDS] = {uint32_t(v), uint32_t(v >> 32)};
  put(o, w);
}

bool bit(const cxxrtl_object *o) { return o->curr[0] & 1; }

uint64_t field(const uint32_t *w, Field f) {
  uint64_t v = 0;
  for (unsigned i = 0; i < f.width; i++) {
    unsigned b = f.off + i;
    v |= uint64_t(w[b / 32] >> (b % 32) & 1) << i;
  }
  return v;
}

// The region holding byte `address`, or null.
Region *region_of(DmaReads &d, uint64_t address) {
  auto it = std::upper_bound(d.regions.begin(), d.regions.end(), address,
                             [](uint64_t a, const Region &r) { return a < r.start; });
  if (it == d.regions.begin())
    return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

// The first cycle at which `now` reaches the design's `wake_at` (its next timer deadline, in
// ns), UINT64_MAX when it has none: an idle or stable design changes state by itself then.
uint64_t wake_cycle(const Sim *s) {
  uint64_t ns = uint64_t(s->wake->curr[0]) | uint64_t(s->wake->curr[1]) << 32;
  if (ns == UINT64_MAX)
    return UINT64_MAX;
  return (ns * 1000 + s->cycle_ps - 1) / s->cycle_ps;
}

// One evaluation a cycle. The design is fully flattened with no combinational feedback, so
// one eval() with a rising clock both settles the combinational logic on this cycle's inputs
// and computes every flip-flop's next value; until commit() the outputs read as this cycle's
// settled values (flip-flops still hold their current state). commit() is the edge.
// Returns false if the design did not settle in one pass (combinational feedback): this loop
// cannot run it.
bool settle_and_sample(Sim *s) {
  s->clk->next[0] = 1;
  return cxxrtl_eval(s->h);
}

// The clock edge. Returns whether any flip-flop or memory word changed. The clock input is a
// plain value (no next state) that commit() copies to the design's edge detector, so lowering
// it before the commit readies the next rising edge: one commit a cycle, not two.
bool edge(Sim *s) {
  s->clk->next[0] = 0;
  bool changed = cxxrtl_commit(s->h);
  s->clocked++;
  return changed;
}

// The first cycle from c at which a stable design's inputs change: an input becomes due, the
// DMA write port turns ready, its timer deadline (`wake_at`), or `until`. Only `now` changes
// before then, and the design samples `now` only on a state change (a timestamp write, a timer
// set) or at its deadline, so those cycles are no-ops.
// UINT64_MAX when nothing will ever change.
uint64_t stable_until(Sim *s, uint64_t c, uint64_t until) {
  uint64_t t = std::min(until, wake_cycle(s));
  if (t <= c)
    return c;
  for (size_t i = 0; i < s->queues.size(); i++) {
    Queue &q = s->queues[i];
    if (q.q.empty() || (s->last_offered >> i & 1))
      continue;                    // nothing, or the same entry offered again
    if (q.q.front().due <= c)
      return c;
    t = std::min(t, q.q.front().due);
  }
  bool wr = c >= s->write_ready_from;
  if (wr != s->last_wr_ready)
    return c;
  if (!wr)
    t = std::min(t, s->write_ready_from);
  return t;
}

// entries queued on all inputs
int queued(const Sim *s) {
  int n = 0;
  for (auto &q : s->queues)
    n += int(q.q.size());
  return n;
}

void push_u64(Queue &q, uint64_t due, uint64_t v) {
  Entry e{};
  e.due = due;
  e.w[0] = uint32_t(v);
  e.w[1] = uint32_t(v >> 32);
  q.q.push_back(e);
}

// Answers the DMA read request offered at cycle c, as Harness._dma_read does: the dwords
// from host memory (all 0 with `error` when the range is not inside one allocation), one per
// step from the link's latency or from when the data path is free, `last` on the final one.
// False leaves it to Python: an address that is not dword-aligned (Python's store keeps such
// dwords apart) or a request of no dwords.
bool serve_dma_read(Sim *s, uint64_t c) {
  DmaReads &d = s->dma;
  const uint32_t *w = d.request->curr;
  uint64_t address = field(w, d.address), count = field(w, d.count), tag = field(w, d.tag);
  if (address & 3 || count == 0)
    return false;
  Region *r = region_of(d, address);
  bool error = !r || address + 4 * count > r->end;
  uint64_t t = c * s->cycle_ps;
  uint64_t start = std::max(t + d.latency_ps, d.free_ps);
  uint64_t fixed = tag << d.r_tag | uint64_t(error) << d.r_error;
  Queue &q = s->queues[d.queue];
  for (uint64_t i = 0; i < count; i++) {
    uint64_t data = 0;
    if (!error) {
      uint64_t k = (address - r->start) / 4 + i;
      data = k < r->dw.size() ? r->dw[k] : 0;
    }
    uint64_t v = fixed | data << d.r_data;
    if (i == count - 1)
      v |= uint64_t(1) << d.r_last;
    push_u64(q, (start + i * d.step_ps + s->cycle_ps - 1) / s->cycle_ps, v);
  }
  d.free_ps = start + count * d.step_ps;
  d.served++;
  return true;
}

}  // namespace

extern "C" {

void *gpufe_open() {
  Sim *s = new Sim;
  s->h = cxxrtl_create(cxxrtl_design_create());
  return s;
}

void gpufe_close(void *p) {
  Sim *s = (Sim *)p;
  cxxrtl_destroy(s->h);
  delete s;
}

void *gpufe_object(void *p, const char *name) { return cxxrtl_get(((Sim *)p)->h, name); }

int gpufe_setup(void *p, const char *clk, const char *now, const char *idle, const char *wake,
                const char *wr_ready, const char *wr_valid, const char **stops, int nstops, uint64_t cycle_ps,
                int jumps) {
  Sim *s = (Sim *)p;
  s->clk = cxxrtl_get(s->h, clk);
  s->now = cxxrtl_get(s->h, now);
  s->idle = cxxrtl_get(s->h, idle);
  s->wake = cxxrtl_get(s->h, wake);
  s->wr_ready = cxxrtl_get(s->h, wr_ready);
  s->wr_valid = cxxrtl_get(s->h, wr_valid);
  if (!s->clk || !s->now || !s->idle || !s->wake || s->wake->width != 64 || !s->wr_ready
      || !s->wr_valid)
    return -1;
  for (int i = 0; i < nstops; i++) {
    cxxrtl_object *o = cxxrtl_get(s->h, stops[i]);
    if (!o)
      return -2 - i;
    s->stops.push_back(o);
  }
  s->cycle_ps = cycle_ps;
  s->jumps = jumps;
  cxxrtl_step(s->h);
  return 0;
}

int gpufe_add_queue(void *p, const char *valid, const char *payload, const char *ready) {
  Sim *s = (Sim *)p;
  Queue q;
  q.valid = cxxrtl_get(s->h, valid);
  q.payload = cxxrtl_get(s->h, payload);
  q.ready = cxxrtl_get(s->h, ready);
  if (!q.valid || !q.payload || !q.ready || words(q.payload) > WORDS)
    return -1;
  s->queues.push_back(q);
  return int(s->queues.size()) - 1;
}

void gpufe_push(void *p, int queue, uint64_t due, const uint32_t *w) {
  Entry e;
  e.due = due;
  memcpy(e.w, w, sizeof e.w);
  ((Sim *)p)->queues[queue].q.push_back(e);
}

// one entry whose payload fits 128 bits (every input port's does): no word array to fill
void gpufe_push_u128(void *p, int queue, uint64_t due, uint64_t lo, uint64_t hi) {
  uint32_t w[WORDS] = {uint32_t(lo), uint32_t(lo >> 32), uint32_t(hi), uint32_t(hi >> 32)};
  gpufe_push(p, queue, due, w);
}

// n entries of payloads up to 64 bits at once
void gpufe_push_u64(void *p, int queue, int n, const uint64_t *dues, const uint64_t *values) {
  for (int i = 0; i < n; i++) {
    uint32_t w[WORDS] = {uint32_t(values[i]), uint32_t(values[i] >> 32)};
    gpufe_push(p, queue, dues[i], w);
  }
}


// Registers the logged output stream (at most 64 bits of payload) and its host horizon.
int gpufe_log(void *p, const char *valid, const char *payload, uint64_t horizon_ps) {
  Sim *s = (Sim *)p;
  s->log_valid = cxxrtl_get(s->h, valid);
  s->log_payload = cxxrtl_get(s->h, payload);
  if (!s->log_valid || !s->log_payload || s->log_payload->width > 64)
    return -1;
  s->log_horizon_ps = horizon_ps;
  return 0;
}

// Copies up to `cap` logged transfers (cycle, payload pairs) into `out` and forgets them;
// returns how many were copied.
int gpufe_take_log(void *p, uint64_t *out, int cap) {
  Sim *s = (Sim *)p;
  int n = std::min(cap, int(s->log.size() / 2));
  std::copy(s->log.begin(), s->log.begin() + 2 * n, out);
  s->log.erase(s->log.begin(), s->log.begin() + 2 * n);
  if (s->log.empty())
    s->log_deadline = UINT64_MAX;
  return n;
}

void gpufe_write_ready_from(void *p, uint64_t cycle) { ((Sim *)p)->write_ready_from = cycle; }

// Host memory allocation [start, end) (bytes); regions never overlap.
void gpufe_mem_map(void *p, uint64_t start, uint64_t end) {
  DmaReads &d = ((Sim *)p)->dma;
  Region r{start, end, {}};
  auto it = std::upper_bound(d.regions.begin(), d.regions.end(), start,
                             [](uint64_t a, const Region &x) { return a < x.start; });
  d.regions.insert(it, std::move(r));
}

// `n` dwords written from byte `address` (dword-aligned writes into an allocation are kept;
// the rest can never be read by a DMA read answered here).
void gpufe_mem_write(void *p, uint64_t address, uint64_t n, const uint32_t *dwords) {
  DmaReads &d = ((Sim *)p)->dma;
  if (address & 3 || n == 0)
    return;
  Region *r = region_of(d, address);
  if (r && address + 4 * n <= r->end) {
    uint64_t k = (address - r->start) / 4;
    if (r->dw.size() < k + n)
      r->dw.resize(k + n);
    memcpy(r->dw.data() + k, dwords, 4 * n);
    return;
  }
  for (uint64_t i = 0; i < n; i++)
    gpufe_mem_write(p, address + 4 * i, 1, dwords + i);
}

// Answer DMA read requests here: `stop` the request stream's index among the stop streams,
// `queue` the response stream's input queue, `request` its payload; fields[0..5] the
// request's address, count and tag (offset, width each), fields[6..9] the response's data,
// tag, last and error offsets.
int gpufe_dma_reads(void *p, int stop, int queue, const char *request, const unsigned *fields,
                    uint64_t latency_ps, uint64_t step_ps) {
  Sim *s = (Sim *)p;
  DmaReads &d = s->dma;
  d.request = cxxrtl_get(s->h, request);
  if (!d.request || words(d.request) > WORDS || stop < 0 || stop >= int(s->stops.size())
      || queue < 0 || queue >= int(s->queues.size()))
    return -1;
  d.stop = stop;
  d.queue = queue;
  d.address = {fields[0], fields[1]};
  d.count = {fields[2], fields[3]};
  d.tag = {fields[4], fields[5]};
  d.r_data = fields[6];
  d.r_tag = fields[7];
  d.r_last = fields[8];
  d.r_error = fields[9];
  d.latency_ps = latency_ps;
  d.step_ps = step_ps;
  d.on = true;
  return 0;
}

// When the DMA read data path is free (ps): shared with Python for the requests it answers.
uint64_t gpufe_dma_free_ps(void *p) { return ((Sim *)p)->dma.free_ps; }
void gpufe_set_dma_free_ps(void *p, uint64_t t) { ((Sim *)p)->dma.free_ps = t; }

void gpufe_set(void *p, void *obj, const uint32_t *w) { put((cxxrtl_object *)obj, w); }

void gpufe_get(void *p, void *obj, uint32_t *w) {
  cxxrtl_object *o = (cxxrtl_object *)obj;
  memcpy(w, o->curr, 4 * words(o));
}

// Registers the status block Python reads after every gpufe_run: [0] cycle, [1] offers (bit per
// stop stream, then dma_write), [2] entries queued on the inputs, [3] the design's wake_at,
// then from [4] on, at a transfer stop, each offered stream's payload in WORDS 32-bit words
// (WORDS / 2 slots each, in the order the payloads were named). Written at once too, for
// what Python reads before the first run.
static void write_status(Sim *s, int reason);

int gpufe_status(void *p, uint64_t *status, const char **payloads, int n) {
  Sim *s = (Sim *)p;
  s->status = status;
  for (int i = 0; i < n; i++) {
    cxxrtl_object *o = cxxrtl_get(s->h, payloads[i]);
    if (!o || words(o) > WORDS)
      return -1 - i;
    s->out_payloads.push_back(o);
  }
  write_status(s, 0);
  return STATUS_PAYLOADS;
}

static void write_status(Sim *s, int reason) {
  uint64_t *st = s->status;
  if (!st)
    return;
  st[0] = s->cycle;
  st[1] = reason == 1 ? s->offers : 0;
  st[2] = queued(s);
  st[3] = uint64_t(s->wake->curr[0]) | uint64_t(s->wake->curr[1]) << 32;
  if (reason == 1)
    for (size_t i = 0; i < s->out_payloads.size(); i++)
      if (s->offers >> i & 1) {
        cxxrtl_object *o = s->out_payloads[i];
        uint32_t *dst = (uint32_t *)(st + STATUS_PAYLOADS + i * (WORDS / 2));
        memset(dst, 0, 4 * WORDS);
        memcpy(dst, o->curr, 4 * words(o));
      }
}


void gpufe_stats(void *p, uint64_t *out) {
  Sim *s = (Sim *)p;
  out[0] = s->clocked;
  out[1] = s->jumped;
  out[2] = s->njumps;
  out[3] = s->skipped;
  out[4] = s->nskips;
  out[5] = s->run_ns;
  out[6] = s->log_stops;
  out[7] = s->dma.served;
}

// Returns 1 transfer offered, 2 `until` reached, 3 idle with nothing queued, 4 busy too long,
// 5 the design needs delta cycles.
static int run_cycles(void *p, uint64_t until, int consume, uint64_t busy_cap) {
  Sim *s = (Sim *)p;
  uint64_t busy = 0;
  const uint64_t host_until = until;
  const uint32_t zero[WORDS] = {0};
  for (;;) {
    uint64_t c = s->cycle;
    if (consume) {
      consume = 0;
    } else {
      // a logged transfer's host deadline ends the run like `until`
      if (s->log_deadline < host_until && c >= s->log_deadline)
        s->log_stops++;
      until = std::min(host_until, s->log_deadline);
      if (s->jumps && s->stable) {
        uint64_t t = stable_until(s, c, until);
        if (t != UINT64_MAX && t > c) {
          s->nskips++;
          s->skipped += t - c;
          s->cycle = c = t;
        }
      }
      if (c >= until)
        return 2;
      s->offered.clear();
      for (size_t i = 0; i < s->queues.size(); i++) {
        Queue &q = s->queues[i];
        if (!q.q.empty() && q.q.front().due <= c) {
          q.valid->next[0] = 1;
          put(q.payload, q.q.front().w);
          s->offered.push_back(int(i));
        } else {
          q.valid->next[0] = 0;
        }
      }
      bool write_ready = c >= s->write_ready_from;
      s->wr_ready->next[0] = write_ready;
      s->last_wr_ready = write_ready;
      s->last_offered = 0;
      for (int i : s->offered)
        s->last_offered |= 1u << i;
      put_u64(s->now, c * s->cycle_ps / 1000);
      if (!settle_and_sample(s))
        return 5;
      if (s->log_valid && bit(s->log_valid)) {
        const uint32_t *w = s->log_payload->curr;
        uint64_t v = w[0] | (words(s->log_payload) > 1 ? uint64_t(w[1]) << 32 : 0);
        if (s->log.empty())
          s->log_deadline = (c * s->cycle_ps + s->log_horizon_ps + s->cycle_ps - 1) / s->cycle_ps;
        s->log.push_back(c);
        s->log.push_back(v);
      }
      int offers = 0;
      for (size_t i = 0; i < s->stops.size(); i++)
        offers |= int(bit(s->stops[i])) << i;
      if (write_ready && bit(s->wr_valid))
        offers |= 1 << s->stops.size();
      // a DMA read answered here is taken at this cycle's edge, as after a stop
      if (s->dma.on && (offers >> s->dma.stop & 1) && serve_dma_read(s, c))
        offers &= ~(1 << s->dma.stop);
      if (offers) {
        s->offers = offers;
        return 1;
      }
    }
    bool idle = bit(s->idle);
    s->last_idle = idle;
    s->quiet = idle && s->offered.empty();
    bool taken[16] = {false};
    for (int i : s->offered)
      taken[i] = bit(s->queues[i].ready);
    if (idle && s->offered.empty()) {
      uint64_t target = std::min(std::min(until, s->log_deadline), wake_cycle(s));
      bool any = target != UINT64_MAX;
      for (auto &q : s->queues)
        if (!q.q.empty()) {
          any = true;
          if (q.q.front().due < target)
            target = q.q.front().due;
        }
      if (!any)
        return 3;
      if (s->jumps && target > c + 1) {
        s->njumps++;
        s->jumped += target - c - 1;
        s->cycle = target - 1;
      }
    }
    bool changed = edge(s);
    s->cycle++;
    bool took = false;
    for (int i : s->offered)
      if (taken[i]) {
        s->queues[i].q.pop_front();
        took = true;
      }
    s->stable = !changed && !took;
    bool had = !s->offered.empty();
    s->offered.clear();
    busy = (had || idle) ? 0 : busy + 1;
    if (busy > busy_cap)
      return 4;
  }
}

// run_cycles' reason (1 transfer, 2 until, 3 idle, 4 busy cap, 5 delta cycles), with the state
// the host reads after every stop folded in: bit 4 quiet, bit 5 last_idle, bit 6 transfers
// logged (gpufe_take_log)
int gpufe_run(void *p, uint64_t until, int consume, uint64_t busy_cap) {
  auto t0 = std::chrono::steady_clock::now();
  int r = run_cycles(p, until, consume, busy_cap);
  Sim *s = (Sim *)p;
  write_status(s, r);
  s->run_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - t0).count();
  return r | int(s->quiet) << 4 | int(s->last_idle) << 5 | int(!s->log.empty()) << 6;
}

}  // extern "C"
