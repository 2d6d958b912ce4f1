import json, math
from stuning.kernels import spmm_scatter as s
db = json.load(open('tuning_db/nvidia-h200.json'))
def old(split, bn, tiles): return 1 if (split == 4 and (bn < 64 or 4 * tiles > 132)) else split
n = 0
for key, e in db['entries'].items():
    if not key.startswith('spmm'): continue
    f = dict(kv.split('=') for kv in key.split('|')[2:])
    for label, c in [('best', e.get('config') or e.get('best', {}).get('config'))] + [(t.get('kernel','?'), t.get('config')) for t in e.get('trials', [])[:0]]:
        if not c or c.get('kernel') != 'scatter' or c.get('split_k') != 4: continue
        m, nn = int(f['m']), int(f['n'])
        bn = c['block_n']; bn = min(bn, max(16, 1 << (nn - 1).bit_length()))
        tiles = math.ceil(m / c['rows']) * math.ceil(nn / bn)
        kt = math.ceil(int(f['k']) / c['nnz_step'])
        if kt < 4: continue
        a = old(4, bn, tiles); b = s.cluster_ctas(4, c['rows'], c['nnz_step'], bn, c['num_stages'], tiles, 132)
        a = a if a == 1 else (4 if s.landing_fits(c['rows'], bn, s.buffer_bytes(c['rows'], c['nnz_step'], bn, c['num_stages'])[2], 4) else 1)
        n += 1
        if a != b: print('CHANGED', key, c['rows'], c['nnz_step'], bn, c['num_stages'], 'tiles', tiles, a, '->', b, e.get('time_us'))
print('four-split scatter entries', n)
