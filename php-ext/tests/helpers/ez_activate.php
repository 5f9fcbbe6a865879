<?php
// An Exponential site with the writerlock extension folder dropped into
// extension/ and activated: the autoload map is generated the way
// bin/php/ezpgenerateautoloads.php --extension makes it (every class declared
// under extension/*/classes), site.ini's ImplementationAlias comes from the
// active extension's settings/site.ini.append.php, and eZDB's factory loads
// the class that alias names. argv: site root, database path.
// Prints JSON: the alias, the class loaded, from where, and the rows written.
list( , $site, $path ) = $argv;
chdir( $site );
require __DIR__ . '/../standins/kernel.php';

// ezpgenerateautoloads.php --extension: class name => file, for extension/*/classes.
$map = array();
foreach ( glob( 'extension/*/classes/*.php' ) as $file )
{
    $tokens = token_get_all( file_get_contents( $file ) );
    foreach ( $tokens as $i => $token )
    {
        if ( is_array( $token ) && $token[0] === T_CLASS && isset( $tokens[$i + 2] ) && is_array( $tokens[$i + 2] ) )
        {
            $map[$tokens[$i + 2][1]] = $file;
        }
    }
}
spl_autoload_register( function ( $class ) use ( $map ) {
    if ( isset( $map[$class] ) )
    {
        require $map[$class];
    }
} );

// eZINI: settings/site.ini.append.php of the active extension (ActiveExtensions[]=writerlock).
function ez_ini( $file )
{
    $text = file_get_contents( $file );
    $text = preg_replace( array( '/^<\?php \/\* #\?ini charset="[^"]*"\?/', '/\*\/ \?>\s*$/' ), '', $text );
    $groups = array();
    $group = null;
    foreach ( preg_split( '/\r?\n/', $text ) as $line )
    {
        $line = trim( $line );
        if ( $line === '' || $line[0] === '#' )
        {
            continue;
        }
        if ( preg_match( '/^\[(\w+)\]$/', $line, $m ) )
        {
            $group = $m[1];
        }
        elseif ( preg_match( '/^(\w+)\[(\w*)\]=(.*)$/', $line, $m ) )
        {
            $groups[$group][$m[1]][$m[2]] = $m[3];
        }
        elseif ( preg_match( '/^(\w+)=(.*)$/', $line, $m ) )
        {
            $groups[$group][$m[1]] = $m[2];
        }
        else
        {
            fwrite( STDERR, "not an eZ ini line: $line\n" );
            exit( 2 );
        }
    }
    return $groups;
}
$settings = ez_ini( 'extension/writerlock/settings/site.ini.append.php' );
$alias = $settings['DatabaseSettings']['ImplementationAlias']['sqlite3'];

// eZDB::instance() with DatabaseImplementation=sqlite3: the alias, if any, names the class.
$ezdb = new $alias( array( 'database' => $path ) );
$ezdb->setErrorHandling( eZDB::ERROR_HANDLING_EXCEPTIONS );
$ezdb->begin();
$ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('activated', 1)" );
$ezdb->commit();
$rows = $ezdb->arrayQuery( "SELECT COUNT(*) AS n FROM pub WHERE worker = 'activated'" );
echo json_encode( array( 'alias' => $alias, 'class' => get_class( $ezdb ), 'file' => $map[$alias] ?? null,
                         'queue' => $ezdb->writerQueue() instanceof WriterLock\Queue, 'rows' => (int)$rows[0]['n'] ) ), "\n";
