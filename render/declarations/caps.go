package declarations

import (
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// file is one declaration file: its documents are held until the Platform is known, and
// then admitted under the caps and the tenant that apply to it (see admit).
type file struct {
	path string
	size int64
	// docs is the number of YAML documents, of any apiVersion.
	docs int
	// docLines are the lines where the first documents start, for messages on caps.
	docLines []int
	// entries are the cairn documents, identified and decoded.
	entries []*entry
}

// docCap caps the documents of one file; from names the setting it comes from.
type docCap struct {
	n    int
	from string
}

func (c docCap) exceeded(file string, line int) *Error {
	return &Error{Reason: ReasonTooManyDocuments, File: file, Line: line,
		Message: fmt.Sprintf("file holds more than %d documents, the cap of %s", c.n, c.from)}
}

// byteCap caps the size of one file; from names the setting it comes from.
type byteCap struct {
	n    int64
	from string
}

func (c byteCap) exceeded(file string) *Error {
	msg := fmt.Sprintf("file is larger than %d bytes", c.n)
	if c.from != "" {
		msg += ", the cap of " + c.from
	}
	return &Error{Reason: ReasonTooLarge, File: file, Message: msg}
}

// fileCaps are the caps on one file owned by tenant (nil: the platform team's): the
// Platform's spec.limits, tightened by the tenant's, within the loader's ceilings.
func (l *loader) fileCaps(spec *cairnv1.PlatformSpec, tenant *cairnv1.Tenant) (byteCap, docCap) {
	own, eff := spec.Effective(nil), spec.Effective(tenant)
	bytes := byteCap{eff.MaxFileBytes, limitField(spec, tenant, "maxFileBytes", eff.MaxFileBytes < own.MaxFileBytes)}
	if bytes.n > l.opts.MaxFileBytes {
		bytes = byteCap{l.opts.MaxFileBytes, "the loader's ceiling"}
	}
	docs := docCap{eff.MaxFileDocuments, limitField(spec, tenant, "maxFileDocuments", eff.MaxFileDocuments < own.MaxFileDocuments)}
	if docs.n > l.opts.MaxFileDocuments {
		docs = docCap{l.opts.MaxFileDocuments, "the loader's ceiling"}
	}
	return bytes, docs
}

// limitField names the field that sets a limit: the tenant's when it is the tighter,
// else the Platform's.
func limitField(spec *cairnv1.PlatformSpec, tenant *cairnv1.Tenant, name string, tenantTighter bool) string {
	if tenant != nil && tenantTighter {
		return fmt.Sprintf("tenant %s: spec.tenants[%d].limits.%s", tenant.Name, tenantIndex(spec, tenant.Name), name)
	}
	return "the Platform's spec.limits." + name
}

func tenantIndex(spec *cairnv1.PlatformSpec, name string) int {
	for i := range spec.Tenants {
		if spec.Tenants[i].Name == name {
			return i
		}
	}
	return -1
}
