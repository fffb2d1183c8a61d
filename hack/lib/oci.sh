# shellcheck shell=bash
# OCI image-layout helpers shared by build-node-images.sh and release.sh (sourced, not run).

# oci_set_ref_name LAYOUT_DIR REF [PYTHON]: name the layout's one image REF. `ctr images import`,
# `podman load` and `skopeo copy` know the image by this annotation. PYTHON (default python3) is
# whichever interpreter the caller trusts; the snippet needs only the standard library.
oci_set_ref_name() {
  "${3:-python3}" - "$1/index.json" "$2" <<'PY'
import json, sys
path, ref = sys.argv[1], sys.argv[2]
with open(path) as f:
    index = json.load(f)
assert len(index["manifests"]) == 1, index
index["manifests"][0].setdefault("annotations", {})["org.opencontainers.image.ref.name"] = ref
with open(path, "w") as f:
    json.dump(index, f, separators=(",", ":"))
PY
}

# oci_tar LAYOUT_DIR OUT: the layout as an archive that depends only on its content (sorted names,
# root owner, epoch mtimes), so the same image always gives the same bytes and checksum.
oci_tar() {
  tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$2" .
}
