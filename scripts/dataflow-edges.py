#!/usr/bin/env python3
"""How far data-flow edges (a field of one API's response named like a required
parameter of another) could reach on the development queries: counts the
ordered pairs of relevant APIs of one query joined by such an edge, with the
fields of the catalog's response schemas, then also of the recorded responses
(docs/benchmarks.md, "Learning from use").

    cd ../shared/datasets/toolbench && python3 <repo>/scripts/dataflow-edges.py
"""
import json, glob, re, itertools, collections
def norm(s): return re.sub(r'[^a-z0-9]','',s.lower())
def fields(schema, out, depth=0):
    if depth>6: return
    if isinstance(schema, dict):
        for k,v in (schema.get('properties') or {}).items():
            out.add(norm(k)); fields(v,out,depth+1)
        if 'items' in schema: fields(schema['items'],out,depth+1)
apis={}
for f in glob.glob('tools/*/*.json'):
    d=json.load(open(f))
    for a in d.get('api_list',[]):
        s=a.get('schema')
        if isinstance(s,str):
            try: s=json.loads(s)
            except Exception: s=None
        out=set()
        if isinstance(s,dict): fields(s,out)
        req={norm(p['name']) for p in a.get('required_parameters') or [] if isinstance(p,dict) and 'name' in p}
        apis[(d.get('tool_name'),a.get('name'))]=(out,req)
def count(apis):
    """(queries with 2+ relevant APIs, ordered relevant pairs, pairs whose source has fields,
    pairs joined by a field -> required-parameter edge, queries with such a pair)."""
    queries = pairs = with_fields = flow = qflow = 0
    for name in ['G1_instruction', 'G1_category', 'G2_instruction']:
        for q in json.load(open(f'queries/stabletoolbench_solvable/{name}.json')):
            rel = [tuple(p[:2]) for p in q.get('relevant APIs', [])]
            if len(rel) < 2:
                continue
            queries += 1
            hit = False
            for a, b in itertools.permutations(rel, 2):
                if a not in apis or b not in apis:
                    continue
                pairs += 1
                fields_a, required_b = apis[a][0], apis[b][1]
                with_fields += bool(fields_a)
                if fields_a & required_b:
                    flow += 1
                    hit = True
            qflow += hit
    return queries, pairs, with_fields, flow, qflow


queries, pairs, with_schema, flow, qflow = count(apis)
print('queries>=2 rel', queries, 'ordered pairs', pairs, 'source has schema', with_schema,
      'flow edges among relevant', flow, 'queries with a flow edge', qflow)
# fields from recorded responses too
import ast
idx=[json.loads(l) for l in open('cache/derived_from_trajectories/index.jsonl')]
def keys(v,out,depth=0):
    if depth>5: return
    if isinstance(v,dict):
        for k,x in v.items(): out.add(norm(str(k))); keys(x,out,depth+1)
    elif isinstance(v,list):
        for x in v[:3]: keys(x,out,depth+1)
for r in idx:
    try: d=json.load(open('cache/derived_from_trajectories/'+r['path']))
    except Exception: continue
    out=set()
    for v in d.values():
        resp=v.get('response') if isinstance(v,dict) else None
        if isinstance(resp,str):
            try: resp=json.loads(resp)
            except Exception:
                try: resp=ast.literal_eval(resp)
                except Exception: resp=None
        keys(resp,out)
    k=(r['tool_name'],r['api_name'])
    if k in apis: apis[k]=(apis[k][0]|out, apis[k][1])
_, pairs, with_schema, flow, qflow = count(apis)
print('with recorded responses: pairs', pairs, 'source has fields', with_schema, 'flow edges', flow, 'queries with one', qflow)
