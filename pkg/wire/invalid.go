package wire

// InvalidError is a request, or a part of one (a session's path), that
// cannot be taken as it is: the client's error, in the API's words. The
// executor returns it; every transport answers it as its own "invalid".
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }
