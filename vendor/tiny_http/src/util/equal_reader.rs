use std::io::Read;
use std::io::Result as IoResult;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A `Reader` that reads exactly the number of bytes from a sub-reader.
///
/// If the limit is reached, it returns EOF. If the limit is not reached
/// when the destructor is called, the remaining bytes are left unread and
/// `left_unread` is set (termsprawl-tools patch; upstream read them here).
pub struct EqualReader<R>
where
    R: Read,
{
    reader: R,
    size: usize,
    left_unread: Arc<AtomicBool>,
}

impl<R> EqualReader<R>
where
    R: Read,
{
    pub fn new(reader: R, size: usize, left_unread: Arc<AtomicBool>) -> EqualReader<R> {
        EqualReader {
            reader,
            size,
            left_unread,
        }
    }
}

impl<R> Read for EqualReader<R>
where
    R: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        if self.size == 0 {
            return Ok(0);
        }

        let buf = if buf.len() < self.size {
            buf
        } else {
            &mut buf[..self.size]
        };

        match self.reader.read(buf) {
            Ok(len) => {
                self.size -= len;
                Ok(len)
            }
            err @ Err(_) => err,
        }
    }
}

impl<R> Drop for EqualReader<R>
where
    R: Read,
{
    fn drop(&mut self) {
        // termsprawl-tools patch: upstream read the rest here, into one buffer of the
        // whole unread length (a declared 10^14 bytes aborted the process), blocking
        // until the client had sent it all. The rest is left unread instead, and the
        // connection ends (`ClientConnection` reads nothing after it). Set before
        // `reader` is dropped, which hands the stream to the connection's next reader.
        if self.size > 0 {
            self.left_unread.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EqualReader;
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn test_limit() {
        use std::io::Cursor;

        let mut org_reader = Cursor::new("hello world".to_string().into_bytes());

        let left_unread = Arc::new(AtomicBool::new(false));
        {
            let mut equal_reader = EqualReader::new(org_reader.by_ref(), 5, left_unread.clone());

            let mut string = String::new();
            equal_reader.read_to_string(&mut string).unwrap();
            assert_eq!(string, "hello");
        }
        assert!(!left_unread.load(Ordering::Acquire));

        let mut string = String::new();
        org_reader.read_to_string(&mut string).unwrap();
        assert_eq!(string, " world");
    }

    #[test]
    fn test_not_enough() {
        use std::io::Cursor;

        let mut org_reader = Cursor::new("hello world".to_string().into_bytes());

        let left_unread = Arc::new(AtomicBool::new(false));
        {
            let mut equal_reader = EqualReader::new(org_reader.by_ref(), 5, left_unread.clone());

            let mut vec = [0];
            equal_reader.read_exact(&mut vec).unwrap();
            assert_eq!(vec[0], b'h');
        }
        assert!(left_unread.load(Ordering::Acquire));

        // termsprawl-tools patch: the rest of the body is left where it was.
        let mut string = String::new();
        org_reader.read_to_string(&mut string).unwrap();
        assert_eq!(string, "ello world");
    }
}
