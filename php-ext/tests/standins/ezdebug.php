<?php
/**
 * Stand-in for eZDebug: log lines go to var/log/<level>.log under the
 * current directory, in eZ's "[ date ] [ip] label:\nmessage" shape.
 */
class eZDebug
{
    const HANDLE_NONE = 0;

    static function writeError( $string, $label = '', $backgroundClass = '' )
    {
        self::writeFile( 'error.log', $string, $label );
    }

    static function writeWarning( $string, $label = '', $backgroundClass = '' )
    {
        self::writeFile( 'warning.log', $string, $label );
    }

    static function writeNotice( $string, $label = '', $backgroundClass = '' )
    {
        self::writeFile( 'notice.log', $string, $label );
    }

    static function writeDebug( $string, $label = '', $backgroundClass = '' )
    {
        self::writeFile( 'debug.log', $string, $label );
    }

    static function writeFile( $fileName, $string, $label )
    {
        $dir = 'var/log';
        if ( !is_dir( $dir ) )
        {
            @mkdir( $dir, 0777, true );
        }
        $line = '[ ' . date( 'M d Y H:i:s' ) . ' ] [' . getmypid() . '] ' . $label . ":\n" . $string . "\n";
        file_put_contents( $dir . '/' . $fileName, $line, FILE_APPEND | LOCK_EX );
    }

    static function createAccumulatorGroup( $key, $name = false ) {}
    static function accumulatorStart( $key, $inGroup = false, $name = false, $recursive = false ) {}
    static function accumulatorStop( $key, $recursive = false ) {}
    static function setHandleType( $type ) {}
    static function printReport( $newWindow = false, $as_html = true, $returnReport = false ) { return ''; }
}
