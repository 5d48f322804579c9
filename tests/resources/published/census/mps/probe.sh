#!/bin/bash
# usage: probe.sh VERSION  -> writes out/VERSION.txt
v=$1; line=$(awk -F'\t' -v v="$v" '$1==v' urls.tsv); fn=$(echo "$line"|cut -f2); sha=$(echo "$line"|cut -f4)
u="https://files.pythonhosted.org/packages/$(echo "$line"|cut -f3 | sed 's#.*/packages/packages/##')"
mkdir -p out w/$v; o=out/$v.txt
curl -sS -o w/$v/t.whl "$u"
got=$(sha256sum w/$v/t.whl|cut -d' ' -f1)
{ echo "version $v"; echo "wheel $fn"; echo "sha256_pypi $sha"; echo "sha256_got $got"
  unzip -o -q w/$v/t.whl 'torch/lib/libtorch_cpu.dylib' 'torch/version.py' -d w/$v
  echo "== version.py"; grep -E '__version__|git_version' w/$v/torch/version.py
  L=w/$v/torch/lib/libtorch_cpu.dylib
  echo "== build version"; llvm-objdump --macho --private-headers $L | grep -A5 -E 'LC_BUILD_VERSION|LC_VERSION_MIN_MACOSX' | grep -E 'cmd|minos|sdk|version'
  echo "== MPS error strings"; strings -a $L | grep -E 'MPS backend is supported on|MacOS 1[0-9]\.[0-9]\+|macOS 1[0-9]\.[0-9]\+' | sort -u | head
  for s in __ZN2at3mps9MPSDeviceC2Ev __ZN2at3mps9MPSDeviceC1Ev __ZN2at3mps12is_availableEv; do
    echo "== disasm $s (objc/selector lines)"; llvm-objdump --macho -d --dis-symname $s $L 2>&1 | grep -E 'objc|selector|literal pool|NSClassFromString|MTLCopy|cfstring|respond|isPlatformVersion|ret$|bl\s' | head -60
  done
  echo "== isMacOS13Plus version constants (mov w0,#major / mov w1,#minor before calls)"; for s in $(llvm-nm -m $L | grep -E 'MPSDevice13isMacOS13Plus|MPSDevice14isMacOSPlus|isMacOS' | grep -v 'clEii' | awk '{print $NF}'); do echo "-- $s"; llvm-objdump --macho -d --dis-symname $s $L | grep -E 'mov\s+w[01], #|selector|respond|literal' | head -40; done
} >> $o 2>&1
rm -rf w/$v
