#if BACKPLANE_TSAN
import BackplaneWire

/// Under `scripts/sanitize thread`, this module's `Mutex` is one ThreadSanitizer can see
/// (`ThreadSanitizerMutex` in BackplaneWire says why).
typealias Mutex<Value> = ThreadSanitizerMutex<Value>
#endif
