#!/bin/bash
# usage: arch.sh VERSION PLATFORM(x86_64|aarch64)
v=$1; p=$2
line=$(python3 - "$v" "$p" <<'P'
import json,gzip,sys
d=json.load(gzip.open('/work/wt/evidence/floors/raw/torch-all.json.gz'))
v,p=sys.argv[1],sys.argv[2]
fs=sorted([f for f in d['releases'][v] if f'manylinux_2_28_{p}' in f['filename'] and 'cp312-cp312' in f['filename']],key=lambda f:f['filename'])
f=fs[0]; print(f['filename'], f['url'].split('/packages/packages/')[-1], f['digests']['sha256'])
P
)
set -- $line; fn=$1; path=$2; sha=$3
d=w_${v}_$p; mkdir -p $d; curl -sS -o $d/t.whl "https://files.pythonhosted.org/packages/$path"
got=$(sha256sum $d/t.whl|cut -d' ' -f1)
{
echo "wheel $fn"; echo "sha256_pypi $sha"; echo "sha256_got $got"
unzip -p $d/t.whl 'torch/version.py' | grep -E "__version__|cuda|git_version"
unzip -p $d/t.whl '*.dist-info/METADATA' | grep -E '^Requires-Dist: (nvidia-cuda-runtime|nvidia-cublas|cuda-toolkit|nvidia-cudnn)' | head -4
echo "== arch flags string in libtorch_python.so / libtorch_cuda.so"
for lib in torch/lib/libtorch_python.so torch/lib/libtorch_cuda.so; do unzip -p $d/t.whl $lib 2>/dev/null | strings -n 6 | grep -E '^(-gencode|sm_[0-9]+a? |.*arch=compute_[0-9]+)' | sort -u | head -5 | sed "s#^#$lib: #"; done
} > out_${v}_$p.txt 2>&1
rm -rf $d
