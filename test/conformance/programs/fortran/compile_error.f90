program ce
  integer :: x
  x = "text"
end program ce
