package render

import "cuelang.org/go/cue"

// mergeTimoni merges overlay over base with the semantics of Timoni's values
// merge (timoni build --values, bundles): the overlay wins at every leaf; a
// struct of base merges field by field into the overlay's (the fields only base
// has are added); a list of base merges element by element with the overlay's
// over the shorter of the two, so a shorter overlay list keeps its length (its
// elements merged with the defaults'), and a longer one conflicts with the
// merged list (CUE reports "incompatible list lengths", as `timoni build`
// does). The merge is made of CUE unifications in the order Timoni makes them,
// so the merged struct's fields come in the order Timoni's have.
func mergeTimoni(overlay, base cue.Value) cue.Value {
	switch base.IncompleteKind() {
	case cue.StructKind:
		return mergeTimoniStruct(overlay, base)
	case cue.ListKind:
		return mergeTimoniList(overlay, base)
	}
	return overlay
}

// mergeTimoniStruct fills, into the overlay, each field of base in base's
// order: merged with the overlay's field of that name, or as base has it.
func mergeTimoniStruct(overlay, base cue.Value) cue.Value {
	out := overlay
	fields, err := base.Fields(cue.Concrete(true), cue.Attributes(true), cue.Definitions(true),
		cue.Hidden(true), cue.Optional(true), cue.Docs(true))
	if err != nil {
		return out
	}
	for fields.Next() {
		p := cue.MakePath(fields.Selector())
		v := fields.Value()
		if own := overlay.LookupPath(p); own.Exists() {
			v = mergeTimoni(own, v)
		}
		out = out.FillPath(p, v)
	}
	return out
}

// mergeTimoniList merges the elements both lists have, pairwise.
func mergeTimoniList(overlay, base cue.Value) cue.Value {
	var elems []cue.Value
	over, errO := overlay.List()
	under, errB := base.List()
	for errO == nil && errB == nil && over.Next() && under.Next() {
		elems = append(elems, mergeTimoni(over.Value(), under.Value()))
	}
	return base.Context().NewList(elems...)
}
