! Fortran: an allocatable array written once by the main program, then read 3 times.
program sweep
  implicit none
  integer, parameter :: n = 262144
  real(8), allocatable :: field(:)
  real(8) :: s
  integer :: i, r
  allocate(field(n)) ! @object field
  do i = 1, n
    field(i) = dble(i)
  end do
  s = 0
  do r = 1, 3
    do i = 1, n
      s = s + field(i)
    end do
  end do
  print '(F0.0)', s
  deallocate(field)
end program sweep
