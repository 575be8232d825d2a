package zzdeps

import (
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/sigstore/cosign/v2/pkg/cosign"
	_ "github.com/sigstore/cosign/v2/pkg/oci/static"
	_ "github.com/sigstore/cosign/v2/pkg/oci/remote"
	_ "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	_ "github.com/sigstore/sigstore/pkg/cryptoutils"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "github.com/sigstore/sigstore/pkg/signature/payload"
	_ "helm.sh/helm/v3/pkg/chart/loader"
	_ "helm.sh/helm/v3/pkg/chartutil"
	_ "helm.sh/helm/v3/pkg/engine"
	_ "helm.sh/helm/v3/pkg/releaseutil"
	_ "helm.sh/helm/v3/pkg/registry"
	_ "oras.land/oras-go/v2"
	_ "oras.land/oras-go/v2/content/memory"
	_ "oras.land/oras-go/v2/registry/remote"
	_ "oras.land/oras-go/v2/registry/remote/auth"
	_ "oras.land/oras-go/v2/registry/remote/retry"
)
