import subprocess,re,struct,sys
L=sys.argv[1]
dis=subprocess.run(['llvm-objdump','--macho','-d','--dis-symname','__ZN2at3mps9MPSDeviceC2Ev',L],capture_output=True,text=True).stdout.splitlines()
out=subprocess.run(['llvm-objdump','--macho','--private-headers',L],capture_output=True,text=True).stdout
secs=[]
for blk in out.split('Section\n')[1:]:
    d=dict(re.findall(r'^\s*(\w+) (\S+)$',blk,re.M))
    if 'sectname' in d: secs.append((d['sectname'],d['segname'],int(d['addr'],16),int(d['size'],16),int(d['offset'])))
def find(a):
    for s in secs:
        if s[2]<=a<s[2]+s[3]: return s
f=open(L,'rb').read()
page=None; found=False
for i,l in enumerate(dis):
    m=re.search(r'adrp\s+x8, \S+ ; (0x[0-9a-f]+)',l)
    if m: page=int(m.group(1),16)
    m=re.search(r'ldr\s+x2, \[x8, #(\d+)\]',l)
    if m and page is not None and i+1<len(dis) and 'instancesRespondToSelector' in dis[i+1]:
        a=page+int(m.group(1)); s=find(a); off=s[4]+a-s[2]; v=struct.unpack('<Q',f[off:off+8])[0]
        t=v&((1<<36)-1); ss=find(t); so=ss[4]+t-ss[2]
        print('selref',hex(a),s[0],'->',ss[0],f[so:so+100].split(b'\0')[0].decode()); found=True
if not found:
    print('no instancesRespondToSelector call in MPSDevice::MPSDevice()' if not any('instancesRespondToSelector' in l for l in dis) else 'call present, selref unresolved')
