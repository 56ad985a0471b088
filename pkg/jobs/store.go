package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The store keeps jobs in a bbolt file, <data_dir>/jobs.db, so that jobs
// and their results survive a restart. Two buckets:
//
//	jobs      id → record (JSON): owner, state, times, result, callback
//	requests  id → the wire.ExecuteRequest (JSON), kept until the job is done
//
// Every state change is one transaction, synced to disk when it commits.

const storeFile = "jobs.db"

// StorePath is where a server with data directory dir keeps its jobs.
func StorePath(dir string) string { return filepath.Join(dir, storeFile) }

var (
	bucketJobs     = []byte("jobs")
	bucketRequests = []byte("requests")
)

type jobState string

const (
	jobQueued  jobState = "queued"
	jobRunning jobState = "running"
	jobDone    jobState = "done"
)

// Callback delivery states.
const (
	callbackPending   = "pending"
	callbackDelivered = "delivered"
	callbackFailed    = "failed"
)

// reasonServerStopped is the error of a job that was running when the
// server stopped (at the end of the shutdown grace period, or a crash).
const reasonServerStopped = "the server stopped while this execution was running"

// Record is a job as stored (by this package on disk, by pkg/cluster in
// JetStream): the same fields answer the same way everywhere.
type Record struct {
	ID         string          `json:"id"`
	Seq        uint64          `json:"seq"` // submission order
	KeyID      string          `json:"key_id,omitempty"`
	Language   string          `json:"language"`
	State      jobState        `json:"state"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  time.Time       `json:"started_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	Result     json.RawMessage `json:"result,omitempty"` // the wire.Result, when done

	CallbackURL string              `json:"callback_url,omitempty"`
	Callback    wire.CallbackStatus `json:"callback,omitzero"`

	// Kind names the transport whose job it is ("" the native API's,
	// "judge0" a Judge0 submission's): its answers and its callback are
	// that transport's (Manager.Kind). Meta is that transport's own record
	// of the submission, kept with the job.
	Kind string          `json:"kind,omitempty"`
	Meta json.RawMessage `json:"meta,omitempty"`
	// Runs is how many times the request runs (Judge0's number_of_runs;
	// 0 or 1: once): the result is the last run's, with the runs' average
	// time and memory.
	Runs int `json:"runs,omitempty"`
}

// store is the open bbolt file.
type store struct {
	db *bolt.DB
}

// ErrNotFound is the error of a job that does not exist, has expired or
// is another key's.
var ErrNotFound = errors.New("no such job")

// openStore opens (creating it if need be) the store in dir. It waits
// at most timeout for the file lock another process may hold.
func openStore(dir string, timeout time.Duration) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := StorePath(dir)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketRequests} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &store{db: db}, nil
}

func (st *store) close() error { return st.db.Close() }

func getRecord(tx *bolt.Tx, id string) (*Record, error) {
	raw := tx.Bucket(bucketJobs).Get([]byte(id))
	if raw == nil {
		return nil, ErrNotFound
	}
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return &rec, nil
}

func putRecord(tx *bolt.Tx, rec *Record) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).Put([]byte(rec.ID), raw)
}

// create stores a new queued job and its request; it sets rec.Seq.
func (st *store) create(rec *Record, request []byte) error {
	return st.db.Update(func(tx *bolt.Tx) error {
		seq, err := tx.Bucket(bucketJobs).NextSequence()
		if err != nil {
			return err
		}
		rec.Seq = seq
		if err := putRecord(tx, rec); err != nil {
			return err
		}
		return tx.Bucket(bucketRequests).Put([]byte(rec.ID), request)
	})
}

// get returns a job (ErrNotFound if there is none).
func (st *store) get(id string) (*Record, error) {
	var rec *Record
	err := st.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getRecord(tx, id)
		return err
	})
	return rec, err
}

// load returns a job and its request.
func (st *store) load(id string) (*Record, []byte, error) {
	var rec *Record
	var request []byte
	err := st.db.View(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getRecord(tx, id); err != nil {
			return err
		}
		request = append([]byte(nil), tx.Bucket(bucketRequests).Get([]byte(id))...)
		return nil
	})
	return rec, request, err
}

// update changes a job in one transaction and returns it as stored.
func (st *store) update(id string, change func(*Record)) (*Record, error) {
	var rec *Record
	err := st.db.Update(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getRecord(tx, id); err != nil {
			return err
		}
		change(rec)
		if rec.State == jobDone {
			if err := tx.Bucket(bucketRequests).Delete([]byte(id)); err != nil {
				return err
			}
		}
		return putRecord(tx, rec)
	})
	return rec, err
}

// recovery is what a previous server left in the store.
type recovery struct {
	queued      []*Record        // to run again, in submission order
	failed      []*Record        // were running when the server stopped
	callbacks   []*Record        // done, with a callback still to deliver
	unreadable  []string         // ids of records that do not decode (left alone)
	resultBytes map[string]int64 // bytes of the stored results, by key id
}

// recover readies the store after a start: jobs that were running when
// the server stopped are finished as failed with reasonServerStopped (they
// may have had effects, so they are not run twice); queued jobs are
// returned to be queued again.
func (st *store) recover(now time.Time) (*recovery, error) {
	rc := &recovery{resultBytes: map[string]int64{}}
	err := st.db.Update(func(tx *bolt.Tx) error {
		var running []*Record
		err := tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var rec Record
			if err := json.Unmarshal(v, &rec); err != nil {
				rc.unreadable = append(rc.unreadable, string(k))
				return nil
			}
			switch rec.State {
			case jobQueued:
				rc.queued = append(rc.queued, &rec)
			case jobRunning:
				running = append(running, &rec)
			case jobDone:
				rc.resultBytes[rec.KeyID] += int64(len(rec.Result))
				if rec.Callback.Status == callbackPending {
					rc.callbacks = append(rc.callbacks, &rec)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, rec := range running {
			finishRecord(rec, now, failedResult(rec.ID, rec.Language, reasonServerStopped))
			rc.resultBytes[rec.KeyID] += int64(len(rec.Result))
			if err := putRecord(tx, rec); err != nil {
				return err
			}
			if err := tx.Bucket(bucketRequests).Delete([]byte(rec.ID)); err != nil {
				return err
			}
			rc.failed = append(rc.failed, rec)
			if rec.Callback.Status == callbackPending {
				rc.callbacks = append(rc.callbacks, rec)
			}
		}
		return nil
	})
	sort.Slice(rc.queued, func(i, k int) bool { return rc.queued[i].Seq < rc.queued[k].Seq })
	return rc, err
}

// expire deletes the jobs done before cutoff and returns how many, and
// the bytes of their results by key id.
func (st *store) expire(cutoff time.Time) (int, map[string]int64, error) {
	n := 0
	freed := map[string]int64{}
	err := st.db.Update(func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		var old [][]byte
		err := jobs.ForEach(func(k, v []byte) error {
			var rec struct {
				KeyID      string          `json:"key_id"`
				State      jobState        `json:"state"`
				FinishedAt time.Time       `json:"finished_at"`
				Result     json.RawMessage `json:"result"`
			}
			if json.Unmarshal(v, &rec) == nil && rec.State == jobDone && rec.FinishedAt.Before(cutoff) {
				old = append(old, append([]byte(nil), k...))
				freed[rec.KeyID] += int64(len(rec.Result))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := jobs.Delete(k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketRequests).Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return n, freed, nil
}

// finishRecord makes rec done with result.
func finishRecord(rec *Record, now time.Time, result json.RawMessage) {
	rec.State, rec.FinishedAt, rec.Result = jobDone, now, result
	if rec.StartedAt.IsZero() {
		rec.StartedAt = now
	}
	if rec.CallbackURL != "" {
		rec.Callback = wire.CallbackStatus{Status: callbackPending, Attempts: rec.Callback.Attempts}
	}
}

// failedResult is the result of a job that could not run to its end for
// a reason of the server's: status error_setup, with the reason.
func failedResult(id, language, reason string) json.RawMessage {
	res := &wire.Result{ExecutionID: id, Language: language, OutputFiles: wire.OutputFiles{}, Error: reason}
	res.Status, res.ExitCode = wire.StatusSetupError, -1
	raw, _ := json.Marshal(res)
	return raw
}
