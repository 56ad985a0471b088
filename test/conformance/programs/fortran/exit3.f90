program e
  stop 3, quiet=.true.
end program e
