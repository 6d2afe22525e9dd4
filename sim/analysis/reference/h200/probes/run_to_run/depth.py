"""Figures of record_depth.sh's traces: for each, the fraction of kernels whose `submitted` is
within 64 ns of the previous kernel's end (any stream: one kernel at a time), the fraction
that start before the previous one ends, and the medians of submitted -> start and kernel
time.

    python depth.py actgap_A2_n8.jsonl.gz ...
"""
import gzip,json,statistics as st,sys
for n in sys.argv[1:]:  # one trace each
    ks=[json.loads(l) for l in gzip.open(n,'rt')]
    ks=[k for k in ks if k['kind']=='kernel' and 'empty' in k['name']]
    ks.sort(key=lambda k:k['start'])
    # overlap measure: fraction of kernels whose submitted is within 64ns before the previous kernel's end
    ser=0; tot=0; ov=0
    for a,b in zip(ks,ks[1:]):
        tot+=1
        if -64<=b['submitted']-a['end']<=64: ser+=1
        if b['start']<a['end']: ov+=1
    s2s=st.median(k['start']-k['submitted'] for k in ks); dur=st.median(k['end']-k['start'] for k in ks)
    print(f"{n:26s} kernels {len(ks):5d} sub~prevend {ser/tot:5.2f} overlap {ov/tot:5.2f} s2s {s2s/1e3:.3f} dur {dur/1e3:.3f}")
