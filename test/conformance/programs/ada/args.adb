with Ada.Text_IO;
with Ada.Command_Line;
procedure Main is
begin
   for I in 1 .. Ada.Command_Line.Argument_Count loop
      Ada.Text_IO.Put_Line (Ada.Command_Line.Argument (I));
   end loop;
end Main;
