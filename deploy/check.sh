#!/usr/bin/env bash
# `make deploy-check`: render the manifests as `kubectl apply -k` would (placeholder secrets in a copy),
# validate them strictly against two Kubernetes versions (kubernetes-validate, offline schemas), and run
# the checkov policy linter. Every finding left is either fixed in the manifests or skipped on its
# resource with a reason (checkov.io/skipN annotations) explained in deploy/README.md, "Policy findings".
# Needs kubectl (kustomize built in), kubernetes-validate and checkov: VALIDATE=... CHECKOV=... override.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VALIDATE=${VALIDATE:-kubernetes-validate}
CHECKOV=${CHECKOV:-checkov}
# The oldest and the newest Kubernetes minor this deployment is checked against.
VERSIONS=${VERSIONS:-"1.30.0 1.37.0"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here" "$work/deploy"
printf 'placeholder-token' > "$work/deploy/secrets/runner-token"
printf 'RANKZERO_DATABASE_URL=postgresql+asyncpg://rankzero:placeholder@rankzero-postgres.rankzero.svc:5432/rankzero\n' \
  > "$work/deploy/secrets/database.env"
printf 'RANKZERO_DISCORD_TOKEN=placeholder\nRANKZERO_SLACK_SIGNING_SECRET=placeholder\n' > "$work/deploy/secrets/bot.env"
printf 'placeholder' > "$work/deploy/postgres/secrets/password"
# What a cluster receives, rendered apart from the sources (which the linter must not scan half-built).
out="$work/out"
mkdir "$out"
kubectl kustomize "$work/deploy" > "$out/rankzero.yaml"
kubectl kustomize "$work/deploy/postgres" > "$out/postgres.yaml"
cp "$here/examples/"*.yaml "$out/"
rendered=("$out/"*.yaml)
for version in $VERSIONS; do
  echo "kubernetes-validate --strict, Kubernetes $version"
  "$VALIDATE" --strict --quiet --kubernetes-version "$version" "${rendered[@]}"
done
echo "checkov (Kubernetes policies)"
# --skip-download: no policy download and no platform calls (the machine may be offline).
"$CHECKOV" --quiet --compact --skip-download --framework kubernetes --directory "$out"
echo "deploy-check: ok"
