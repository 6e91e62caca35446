package cache

// Which view's import answers a service.
//
// Every shape of ServiceImport has one view: an informer through one API
// version. With conversion strategy None each object has data in at most one
// shape, and the views see a write at different moments; while they disagree
// on the object's resourceVersion, one of them has not caught up. The answer
// never moves to older data, and is kept while no view has data and the views
// disagree, so that a lookup never fails or flaps in between; once they agree,
// the views decide alone, but for one case: every answering view reads an
// answered object empty while a shape that may hold its data is not read by
// any of them yet (a view of it is starting, or discovery has not been asked
// since the write was seen: the write may have gone through a version that
// has just started being served). The object was not deleted (a delete
// leaves the views holding nothing), so the answer is kept until a view
// that holds the data answers, or until discovery, asked after the write
// was seen, shows that every shape served is read by an answering view.
//
// chooseImport and judgeLoss decide from nothing but what the views hold,
// the answer in use and whether a shape may be unread, so that every case a
// migration goes through is a row of TestChooseImport. (*Controller).choose
// gathers their input.

// viewRole is a view's part in answering.
type viewRole int

const (
	// answering: synced and in place as its shape's view.
	answering viewRole = iota
	// starting: started to become its shape's view, not in place yet (not
	// synced, or behind the view it replaces). What it holds is never
	// answered: it may not have listed everything yet.
	starting
)

// viewImport is what one view holds of a service.
type viewImport struct {
	version string // the view's API version: names the view in logs and tables; nothing is decided on it
	role    viewRole
	im      *Import // the view's import of the object; nil when it holds none
}

// agreement is what the answering views hold of one object, taken together.
// It is made for every rebuild of a service, so it allocates nothing.
type agreement struct {
	views    int     // answering views
	starting int     // views starting
	held     int     // how many of them hold a import of the object
	heldRV   string  // the resourceVersion of the first import held
	newest   *Import // the newest import with data; of equally new ones, the first
	// agreed: every answering view holds the object at one resourceVersion,
	// or none holds it (deleted, or never there).
	agreed bool
}

// agree sums up what the answering views hold. Views come in shape order,
// the root shape first, so when two imports with data are equally new (which
// conversion None never gives, and which resourceVersions that are not well
// formed always give), the root shape's wins.
func agree(views []viewImport) agreement {
	a := agreement{agreed: true}
	for _, v := range views {
		if v.role != answering {
			a.starting++
			continue
		}
		a.views++
		im := v.im
		if im == nil {
			continue
		}
		if a.held == 0 {
			a.heldRV = im.ResourceVersion
		}
		a.held++
		a.agreed = a.agreed && im.ResourceVersion == a.heldRV
		if (im.HasData || im.refused()) && (a.newest == nil || newer(im.ResourceVersion, a.newest.ResourceVersion)) {
			a.newest = im
		}
	}
	a.agreed = a.agreed && (a.held == a.views || a.held == 0)
	return a
}

// readEmpty reports whether every answering view holds the object, without
// data, at one write: the object's data left the shapes the views read (or
// was lost), and it was not deleted.
func (a agreement) readEmpty() bool {
	return a.agreed && a.held > 0 && a.newest == nil
}

// unreadShape reports whether a shape no answering view reads may hold the
// data of an object every answering view reads empty: unread says so (the
// caller's knowledge of discovery), or a view is starting.
func (a agreement) unreadShape(unread bool) bool {
	return a.readEmpty() && (unread || a.starting > 0)
}

// chooseImport returns the import the service is answered from, nil for no
// answer; prev is the answer in use, nil when there is none. unread says
// that a shape served may be read by no answering view yet: a view of it is
// starting, or discovery has not been asked since the object was seen empty.
func chooseImport(views []viewImport, prev *Service, unread bool) *Import {
	a := agree(views)
	switch {
	case prev != nil && a.newest != nil && newer(prev.rec.ResourceVersion, a.newest.ResourceVersion):
		// The answer is newer than every view's data: the view with the new
		// write reads it empty and the other has not caught up, or a view
		// that replaced another is behind it. Never go back to older data.
		return prev.rec
	case prev != nil && a.newest == nil && !a.agreed:
		// No data in any view, and a view has not caught up: a delete, or a
		// rewrite into the other shape, seen by one view so far. Keep
		// answering until they agree.
		return prev.rec
	case prev != nil && a.unreadShape(unread):
		// Every answering view reads the object empty, and the data may
		// be in a shape none of them reads yet: rewritten through a
		// version that has just started being served. Not deleted: keep
		// answering until that shape is read, or known not to be served.
		return prev.rec
	default:
		return a.newest
	}
}

// lossVerdict is what the views say about the object's data.
type lossVerdict int

const (
	// lossUnknown: nothing to say. The views disagree (one has not caught
	// up), or the only view reads the object empty and nothing was answered
	// before: its data may be in the other shape, which is not read (that is
	// reported as an unread version, not per object), or every view reads it
	// empty while a shape may not be read yet (unread).
	lossUnknown lossVerdict = iota
	// notLost: the views agree that the object has data, or that it is gone.
	notLost
	// lost: every answering view reads the object empty at one write: it was
	// written through a version that is not the storage version, and the API
	// server dropped its fields.
	lost
)

// judgeLoss says whether the object's data was lost and, when it was, at
// which resourceVersion; unread is chooseImport's.
func judgeLoss(views []viewImport, prev *Service, unread bool) (lossVerdict, string) {
	a := agree(views)
	switch {
	case !a.agreed:
		return lossUnknown, ""
	case a.newest != nil || a.held == 0:
		return notLost, ""
	case a.unreadShape(unread):
		return lossUnknown, ""
	case a.views > 1 || prev != nil:
		return lost, a.heldRV
	default:
		return lossUnknown, ""
	}
}
