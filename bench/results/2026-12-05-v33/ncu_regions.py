import csv, sys, re, collections
rows = list(csv.reader(open(sys.argv[1], newline='', errors='replace')))
hi = next(i for i, r in enumerate(rows) if r and r[0] == 'Address')
hdr = rows[hi]; body = [r for r in rows[hi+1:] if len(r) == len(hdr)]
def c(n): return hdr.index(n)
src = c('Source'); samp = c('Warp Stall Sampling (All Samples)'); exe = c('Instructions Executed')
def num(r, i):
    try: return float(r[i].replace(',', ''))
    except: return 0.0
inc = next(k for k, r in enumerate(body) if 'SETMAXREG.TRY_ALLOC' in r[src])
dec = next(k for k, r in enumerate(body) if 'SETMAXREG.DEALLOC' in r[src])
regions = {'pre': range(0, min(inc, dec)), 'PV' if inc < dec else 'S': range(min(inc, dec), max(inc, dec)),
           'S' if inc < dec else 'PV': range(max(inc, dec), len(body))}
reasons = [(i, h) for i, h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
tot = sum(num(r, samp) for r in body)
for name, rg in regions.items():
    rs = [body[k] for k in rg]
    s = sum(num(r, samp) for r in rs)
    print(f'== {name}: samples {s:.0f} ({100*s/tot:.1f}%), instructions executed {sum(num(r, exe) for r in rs):.0f}')
    st = sorted(((sum(num(r, i) for r in rs), h) for i, h in reasons), reverse=True)
    print('   ' + ', '.join(f'{h[6:]} {100*v/max(s,1):.1f}%' for v, h in st[:9]))
    ops = collections.Counter(); opx = collections.Counter()
    for r in rs:
        m = re.match(r'\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)', r[src]); op = m.group(2) if m else '?'
        ops[op] += num(r, samp); opx[op] += num(r, exe)
    print('   ' + ', '.join(f'{o} {100*v/max(s,1):.1f}%/{opx[o]:.0f}' for o, v in ops.most_common(10)))
