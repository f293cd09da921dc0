import pyarrow.fs, sys, glob, os
c = pyarrow.fs.GcsFileSystem(anonymous=True, endpoint_override="127.0.0.1:49500", scheme="http", retry_time_limit=None)
def put(path, data):
    with c.open_output_stream(path) as o: o.write(data)
if __name__ == "__main__":
    for f in sorted(glob.glob('/tmp/probe_obj/cifar/*.tfrecord')): put('gtrain/cifar/' + os.path.basename(f), open(f,'rb').read())
    print([x.path for x in c.get_file_info(pyarrow.fs.FileSelector('gtrain/cifar'))])
