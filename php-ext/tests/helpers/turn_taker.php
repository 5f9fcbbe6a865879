<?php
// Takes the writer turn with WriterLock\Queue::acquire() argv[2] times on
// database argv[1], holding it argv[3] milliseconds each time, with no
// SQLite connection at all; prints one line per turn: the monotonic clock
// (hrtime, nanoseconds, the same clock in every process) just after
// acquire() returned and just before release().
list( , $path, $turns, $holdMs ) = $argv;
$queue = new WriterLock\Queue( $path );
echo "ready\n";
fflush( STDOUT );
fgets( STDIN );                     // start together
for ( $i = 0; $i < (int)$turns; $i++ )
{
    $queue->acquire( 10.0 );
    $enter = hrtime( true );
    usleep( (int)$holdMs * 1000 );
    $leave = hrtime( true );
    $queue->release();
    echo "$enter $leave\n";
}
