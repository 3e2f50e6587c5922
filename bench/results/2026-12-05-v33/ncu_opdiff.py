import csv, re, collections, sys
def load(fn):
    rows=list(csv.reader(open(fn,newline='')))
    hi=next(i for i,r in enumerate(rows) if r and r[0]=='Address'); hdr=rows[hi]; body=[r for r in rows[hi+1:] if len(r)==len(hdr)]
    src=hdr.index('Source'); samp=hdr.index('Warp Stall Sampling (All Samples)'); exe=hdr.index('Instructions Executed')
    reasons=[(i,h) for i,h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
    inc=next(k for k,r in enumerate(body) if 'TRY_ALLOC' in r[src]); dec=next(k for k,r in enumerate(body) if 'DEALLOC' in r[src])
    out={}
    for name,rg in (('PV',range(inc,dec)),('S',range(dec,len(body)))):
        ops=collections.defaultdict(lambda: collections.Counter())
        for k in rg:
            r=body[k]; m=re.match(r'\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)',r[src]); op=m.group(2) if m else '?'
            if op=='LDS' and '[RZ]' in r[src]: op='LDS_dummy'
            f=lambda i: float(r[i].replace(',','') or 0) if r[i] not in ('-','') else 0
            ops[op]['samp']+=f(samp); ops[op]['exe']+=f(exe)
            for i,h in reasons: ops[op][h[6:]]+=f(i)
        out[name]=ops
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
for reg in ('S','PV'):
    print('==',reg,'opcode: samples a/b, executed a/b, top stall reasons in a')
    keys=sorted(set(a[reg])|set(b[reg]), key=lambda o: -(a[reg][o]['samp']))
    for o in keys[:16]:
        x=a[reg][o]; y=b[reg][o]
        st=sorted(((v,k) for k,v in x.items() if k not in('samp','exe')),reverse=True)[:4]
        print(f'  {o:10s} {x["samp"]:6.0f} {y["samp"]:6.0f}  {x["exe"]/1e6:6.2f}M {y["exe"]/1e6:6.2f}M  '+' '.join(f'{k}={v:.0f}' for v,k in st))
